package apply

import (
	"context"

	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// changes reports whether carrying out it changes the engine.
func changes(it Item) bool {
	return it.Action == Create || it.Action == Recreate || it.Action == Remove
}

// order is the depends-on order of one execute (lifecycle.Order).
type order struct{ *lifecycle.Order }

func newOrder(items []Item) order {
	changing := map[string][]string{}
	for _, it := range items {
		if !changes(it) {
			continue
		}
		changing[it.Name] = nil
		if it.Desired != nil && it.Action != Remove {
			changing[it.Name] = it.Desired.Def.Dependencies(it.Module)
		}
	}
	return order{lifecycle.NewOrder(changing)}
}

func (o order) wait(ctx context.Context, it *Item) string { return o.Wait(ctx, it.Name) }
func (o order) finish(name string, failed bool)           { o.Finish(name, failed) }
