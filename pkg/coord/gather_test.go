package coord

import "github.com/meshctl/meshctl/pkg/ledger"

// The etcd ledger is the store of mesh windows.
var _ GatherStore = (*ledger.Ledger)(nil)
