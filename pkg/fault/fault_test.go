package fault

import (
	"errors"
	"testing"
)

func TestNew(t *testing.T) {
	err := New(Busy, "module %s is busy", "web")
	if err.Error() != "module web is busy" {
		t.Errorf("Error() = %q", err.Error())
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Fault() != Busy {
		t.Errorf("New(Busy, …) is not an *Error of kind busy: %#v", err)
	}
}
