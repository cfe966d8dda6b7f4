package apply

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// healInterrupted puts back what an apply that died while carrying out its
// plan left behind: its claim is recorded but dead, and a container it was
// replacing is still aside (NAME.meshctl-old), with or without an
// unverified new NAME. The old container is what last ran healthy: it is
// renamed back and started, the unverified new one removed, and the plan
// that follows replaces it again, health gate and all. A container some
// window holds is left alone. It returns the containers as the engine has
// them now.
func healInterrupted(ctx context.Context, lock *state.Lock, eng engine.Client, scope string, observed []engine.Container,
	hd *holds.Doc, progress func(string, ...any)) ([]engine.Container, error) {
	var doc claims.Doc
	if _, err := lock.Read(claims.File, &doc); err != nil || len(doc.Claims) == 0 {
		return observed, err
	}
	live, err := claims.Live(lock.Dir(), lock.Read)
	if err != nil || len(live) == len(doc.Claims) {
		return observed, err
	}
	isLive := map[string]bool{}
	for _, c := range live {
		isLive[c.ID] = true
	}
	held := map[string]bool{}
	for _, h := range hd.Holds {
		for _, n := range h.Containers {
			held[n] = true
		}
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		if IsService(c, scope) {
			byName[c.Name] = c
		}
	}
	changed := false
	for _, c := range doc.Claims {
		if isLive[c.ID] {
			continue
		}
		for _, name := range c.Containers {
			aside, ok := byName[lifecycle.OldName(name)]
			if !ok || held[name] {
				continue
			}
			if cur, ok := byName[name]; ok {
				if err := eng.Remove(ctx, cur.ID); err != nil {
					return observed, fmt.Errorf("remove the unverified %s an interrupted apply left: %w", name, err)
				}
			}
			if err := eng.Rename(ctx, aside.ID, name); err != nil {
				return observed, fmt.Errorf("put %s back: %w", name, err)
			}
			if err := eng.Start(ctx, aside.ID); err != nil {
				return observed, fmt.Errorf("start %s again: %w", name, err)
			}
			progress("put %s back: an apply that died while replacing it left it aside\n", name)
			changed = true
		}
	}
	if err := lock.Write(claims.File, &claims.Doc{Claims: live}); err != nil {
		return observed, err
	}
	if !changed {
		return observed, nil
	}
	return eng.List(ctx, Managed(scope))
}
