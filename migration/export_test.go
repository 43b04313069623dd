package migration

import (
	"fmt"
	"os"
	"sync"

	"github.com/sluicedb/sluice/internal/mdl"
)

// A child process of the kill tests dies at the failpoint SLUICE_FAILPOINT
// names, at once and without cleaning up, as if killed there.
func init() {
	if at := os.Getenv("SLUICE_FAILPOINT"); at != "" {
		failpoint = func(name string) {
			if name == at {
				os.Exit(9)
			}
		}
	}
}

var failRename sync.Map // database -> struct{}

// FailRenameOnce makes the next cut-over attempt in database fail as a
// RENAME would that is worth retrying.
func FailRenameOnce(database string) {
	failRename.Store(database, struct{}{})
}

// RenameFailurePending reports whether the failure FailRenameOnce set up
// is still waiting for a RENAME in database.
func RenameFailurePending(database string) bool {
	_, ok := failRename.Load(database)
	return ok
}

var atRename sync.Map // database -> func()

var listOnly sync.Map // database -> struct{}

// SessionListOnly makes the MariaDB cut-over in database look for sessions
// ahead of its RENAME in the session list, as where performance_schema is
// off.
func SessionListOnly(database string) { listOnly.Store(database, struct{}{}) }

// AtRenameOnce runs fn once, in the next cut-over attempt in database, while
// its locks are held and just before its RENAME is sent.
func AtRenameOnce(database string, fn func()) {
	atRename.Store(database, fn)
}

func init() {
	sessionListOnly = func(database string) bool {
		_, ok := listOnly.Load(database)
		return ok
	}
	beforeRename = func(database string) error {
		if fn, ok := atRename.LoadAndDelete(database); ok {
			fn.(func())()
		}
		if _, ok := failRename.LoadAndDelete(database); ok {
			return fmt.Errorf("%w: the test failed this RENAME", mdl.ErrRetry)
		}
		return nil
	}
}

// RunLockName is the named lock a run of database.table holds.
func RunLockName(database, table string) string { return runLockName(database, table) }
