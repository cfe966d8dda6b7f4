package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// recreateStartFirst replaces old, which runs, with a new container for d
// without a gap. The new one is created under its temporary name
// (NewName), on d's networks. It is started beside the old one and gated
// (WaitHealthy). Only then is it given the service's aliases there. A new
// one that fails the gate is removed, and the old one is never touched.
// Once the new one is healthy, the old one is renamed RetiringName while
// it still runs. That name marks, for coord.HealClaims, that the new one
// passed its gate. The new one takes the name. The old one is taken off
// d's networks, so it leaves the aliases. It drains for d's drain period,
// stops and goes.
func (x Executor) recreateStartFirst(ctx context.Context, d *Desired, old engine.Container) error {
	if err := x.EnsureNetworks(ctx, d.Spec.Networks); err != nil {
		return fmt.Errorf("create new %s: %w; the old container was left as it was", d.Name, err)
	}
	// On the networks, but not yet under the service's aliases. So no
	// client reaches it before it has passed its gate.
	spec := d.EngineSpec(x.Scope)
	for net := range spec.Networks {
		spec.Networks[net] = nil
	}
	id, err := x.createNewAs(ctx, d, spec)
	if err != nil {
		return fmt.Errorf("create new %s: %w; the old container was left as it was", d.Name, err)
	}
	err = x.startNew(ctx, d, id)
	if err != nil {
		err = fmt.Errorf("start new %s: %w", d.Name, err)
	} else if err = x.gate(ctx, id, d.Name); err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err == nil {
		err = x.takeAliases(ctx, d, id)
	}
	if err != nil {
		// Off the aliases first, so that a client's next lookup finds only
		// the old one. Then it goes.
		_ = x.leaveNetworks(CleanupContext(ctx), d, id)
		return errors.Join(err, x.RemoveNew(ctx, d.Name, id), errors.New("the old container was left as it was"))
	}
	if err := x.moveAside(ctx, old, RetiringName(d.Name)); err != nil {
		// The engine may have done it all the same. The old one, which
		// runs, keeps or takes back its name once the new one is gone.
		err = fmt.Errorf("rename %s to %s: %w", d.Name, RetiringName(d.Name), err)
		if rerr := x.RemoveNew(ctx, d.Name, id); rerr != nil {
			return errors.Join(err, rerr)
		}
		if nerr := x.putBackName(ctx, d.Name, old.ID); nerr != nil {
			return notPutBack(d.Name, errors.Join(err, nerr))
		}
		return errors.Join(err, errors.New("the old container was left as it was"))
	}
	if err := x.Rename(ctx, id, d.Name); err != nil {
		// The old one still runs, on its networks. It takes its name back.
		err = fmt.Errorf("rename new %s to its name: %w", d.Name, err)
		cctx := CleanupContext(ctx)
		if rerr := x.RemoveNew(ctx, d.Name, id); rerr != nil {
			// The old one runs on as RetiringName. The new one passed its
			// gate, so the heal carries the recreate through.
			return notPutBack(d.Name, errors.Join(err, rerr))
		}
		if rerr := x.Rename(cctx, old.ID, d.Name); rerr != nil {
			return notPutBack(d.Name, errors.Join(err, wrapErr("rename "+RetiringName(d.Name)+" back", rerr)))
		}
		return err
	}
	return x.retireThrough(ctx, d, old)
}

// retire takes the old container of a start-first recreate off the
// service's aliases on d's networks (leaveAliases). That container is
// retiring and running. The aliases then answer with the new one only. retire lets it drain, then stops
// and removes it. After a signal the drain is cut short. The stop and the
// removal are seen through. It is one try of retireThrough.
func (x Executor) retire(ctx context.Context, d *Desired, old engine.Container) error {
	var errs []error
	if err := x.leaveAliases(ctx, d, old); err != nil {
		errs = append(errs, fmt.Errorf("the old %s: %w", d.Name, err))
	} else {
		drain := time.NewTimer(d.Def.DrainOf())
		select {
		case <-drain.C:
		case <-ctx.Done():
			drain.Stop()
		}
	}
	cctx := CleanupContext(ctx)
	// The engine may have done a stop though it said otherwise, its
	// answer lost. So it is asked, and the old one goes all the same.
	if err := StopThrough(cctx, x.Engine, old.ID, StopTimeoutOf(old)); err != nil && !x.stopped(cctx, old.ID) {
		errs = append(errs, fmt.Errorf("stop the old %s: %w", d.Name, err))
	} else if err := x.RemoveGone(cctx, old.ID); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// leaveAliases takes old off the service's aliases on d's networks. It
// keeps old's address there, so connections in flight still reach it. The
// engine sets aliases only as a container joins a network. So old leaves
// each network and joins it again, at its address and without aliases.
// A network without a configured subnet refuses the address. There old
// joins at the address the engine gives, the lowest free one. A failed
// join costs only the drain: old is off the aliases all the same.
func (x Executor) leaveAliases(ctx context.Context, d *Desired, old engine.Container) error {
	var addrs map[string]string
	if c, err := x.Engine.Inspect(ctx, old.ID); err == nil {
		addrs = c.Addresses
	}
	var errs []error
	for _, net := range slices.Sorted(maps.Keys(d.Spec.Networks)) {
		if err := x.Engine.DisconnectNetwork(ctx, net, old.ID); err != nil {
			if !engine.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("take it off %s: %w", net, err))
			}
			continue
		}
		if addr := addrs[net]; addr == "" || engine.IsAddressRefused(x.Engine.ConnectNetworkAt(ctx, net, old.ID, addr)) {
			_ = x.Engine.ConnectNetwork(ctx, net, old.ID, nil)
		}
	}
	return errors.Join(errs...)
}

// takeAliases gives container id, healthy, the service's aliases on d's
// networks. The engine sets a container's aliases on a network only as it
// joins it. So id leaves each network and joins it again with them.
func (x Executor) takeAliases(ctx context.Context, d *Desired, id string) error {
	aliases := d.networkAliases()
	for _, net := range slices.Sorted(maps.Keys(aliases)) {
		if err := x.Engine.DisconnectNetwork(ctx, net, id); err != nil {
			return fmt.Errorf("give new %s its aliases on %s: %w", d.Name, net, err)
		}
		if err := x.Engine.ConnectNetwork(ctx, net, id, aliases[net]); err != nil {
			return fmt.Errorf("give new %s its aliases on %s: %w", d.Name, net, err)
		}
	}
	return nil
}

// leaveNetworks takes container id off d's networks. It no longer answers
// to the service's aliases there, and its connections on them end.
func (x Executor) leaveNetworks(ctx context.Context, d *Desired, id string) error {
	var errs []error
	for _, net := range slices.Sorted(maps.Keys(d.Spec.Networks)) {
		if err := x.Engine.DisconnectNetwork(ctx, net, id); err != nil && !engine.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("take it off %s: %w", net, err))
		}
	}
	return errors.Join(errs...)
}

// StartsFirst reports whether a recreate of d is start-first. Running says
// whether d's old container runs.
func StartsFirst(d *Desired, running bool) bool {
	return running && d.Def.UpdateOrder == mesh.StartFirst
}
