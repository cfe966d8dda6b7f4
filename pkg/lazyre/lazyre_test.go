package lazyre

import "testing"

func TestCompiledOnceOnFirstUse(t *testing.T) {
	re := New(`^a+$`)
	first := re()
	if !first.MatchString("aaa") || first.MatchString("b") {
		t.Fatalf("%v does not match as ^a+$", first)
	}
	if re() != first {
		t.Fatal("a second call compiled the expression again")
	}
}

func TestInvalidPanicsAtFirstUseNotBefore(t *testing.T) {
	re := New(`(`) // must not panic here
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid expression did not panic at its first use")
		}
	}()
	re()
}
