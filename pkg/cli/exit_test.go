package cli

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
)

// faulty is an error of a given kind, as the domain packages' typed errors are.
type faulty fault.Kind

func (f faulty) Error() string     { return string(f) }
func (f faulty) Fault() fault.Kind { return fault.Kind(f) }

// TestExitCode checks the one switch of CONTRACT §3: every kind maps to its
// exit status, wrapped or not, the first kind in a chain decides, and an
// error without a kind has failed.
func TestExitCode(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"failed", nil, faulty(fault.Failed), 1},
		{"bad input", nil, faulty(fault.BadInput), 2},
		{"busy", nil, faulty(fault.Busy), 3},
		{"conflict", nil, faulty(fault.Conflict), 4},
		{"interrupted", nil, faulty(fault.Interrupted), 130},
		{"unknown kind", nil, faulty("new"), 1},
		{"wrapped", nil, fmt.Errorf("record: %w", faulty(fault.Conflict)), 4},
		{"first kind wins", nil, fmt.Errorf("apply: %w", &window.FailedError{Err: faulty(fault.Busy)}), 1},
		{"joined", nil, errors.Join(errors.New("plain"), faulty(fault.Busy)), 3},
		{"no kind", nil, errors.New("step failed"), 1},
		{"usage", nil, usageErrorf("bad flag"), 2},
		{"usage before kind", nil, &UsageError{Err: faulty(fault.Busy)}, 2},
		{"interrupted context", canceled, errors.New("stopped"), 130},
		{"canceled", nil, fmt.Errorf("pull: %w", context.Canceled), 130},
		{"kind before interrupted context", canceled, faulty(fault.Busy), 3},
		{"cobra usage", nil, errors.New(`unknown command "x" for "meshctl"`), 2},
		{"state busy", nil, &state.BusyError{}, 3},
		{"ledger conflict", nil, &ledger.ConflictError{}, 4},
		{"engine unreachable", nil, &engine.UnreachableError{Err: errors.New("refused")}, 1},
		{"window interrupted", nil, &window.FailedError{Err: errors.New("signal"), Interrupted: true}, 130},
		{"status problems", nil, problemsError(2), 1},
	}
	for _, tt := range tests {
		ctx := tt.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		if got := exitCode(ctx, tt.err); got != tt.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}
