package plan

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/schema"
)

// Facts are what sluice reads from the server to plan.
type Facts struct {
	Server   Server
	Version  string
	CPUs     int   // 0 when unknown
	Replicas int   // connections reading the binlog (replicas, CDC tools)
	FreePool int64 // free buffer pool bytes
}

// ReadFacts reads the server's version, processors, binlog readers and free
// buffer memory. Each is best effort: a missing privilege leaves it unknown.
func ReadFacts(ctx context.Context, db *sql.DB, host string) (Facts, error) {
	var f Facts
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&f.Version); err != nil {
		return f, fmt.Errorf("read the server version: %w", err)
	}
	f.Server = ParseServer(f.Version)
	var vcpus string
	if db.QueryRowContext(ctx, "SELECT VCPU_IDS FROM information_schema.RESOURCE_GROUPS WHERE RESOURCE_GROUP_NAME = 'USR_default'").Scan(&vcpus) == nil {
		f.CPUs = CountCPUs(vcpus)
	}
	if f.CPUs == 0 && isLocal(host) {
		f.CPUs = runtime.NumCPU()
	}
	db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.threads WHERE PROCESSLIST_COMMAND LIKE 'Binlog Dump%'").Scan(&f.Replicas)
	var free, page int64
	if db.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Innodb_buffer_pool_pages_free'").Scan(&free) == nil &&
		db.QueryRowContext(ctx, "SELECT @@innodb_page_size").Scan(&page) == nil {
		f.FreePool = free * page
	}
	return f, nil
}

// DDLMemory is the index-build memory sluice allows by default: a quarter of
// the free buffer pool, between 64 MiB and 1 GiB.
func (f Facts) DDLMemory() int64 {
	return min(max(f.FreePool/4, 64<<20), 1<<30)
}

// CountCPUs counts the processors in a VCPU_IDS list such as "0-3,6".
func CountCPUs(ids string) int {
	n := 0
	for _, part := range strings.Split(ids, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				continue
			}
		}
		n += b - a + 1
	}
	return n
}

func isLocal(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Make reads the table and the server and plans the ALTER, counting the rows
// at risk. It writes nothing.
func Make(ctx context.Context, db *sql.DB, host, database, table string, a *ddl.Alter, o Options) (*Plan, Facts, error) {
	f, err := ReadFacts(ctx, db, host)
	if err != nil {
		return nil, f, err
	}
	t, err := schema.Load(ctx, db, database, table)
	if err != nil {
		return nil, f, err
	}
	if err := CheckColumns(t, a); err != nil {
		return nil, f, err
	}
	if err := CheckEngine(a); err != nil {
		return nil, f, err
	}
	if o.CPUs == 0 {
		o.CPUs = f.CPUs
	}
	if o.DDLMemory == 0 {
		o.DDLMemory = f.DDLMemory()
	}
	if f.Replicas > 0 {
		o.Replicas = true
	}
	p := Decide(t, a, f.Server, o)
	if err := CountRisks(ctx, db, p.Risks); err != nil {
		return nil, f, err
	}
	if view, err := mdl.ReadLockView(ctx, db); err == nil {
		p.LockGuardBlind = view.Blind()
	}
	return p, f, nil
}

// CheckEngine refuses an ALTER that moves the table to an engine other than
// InnoDB: sluice's copy relies on transactions the shadow table rolls back
// (the trial copy) and on row locks (the apply's locking reads).
func CheckEngine(a *ddl.Alter) error {
	for _, spec := range a.Specs {
		if spec.Tp != ast.AlterTableOption {
			continue
		}
		if e := optString(spec, ast.TableOptionEngine); e != "" && !strings.EqualFold(e, "InnoDB") {
			return fmt.Errorf("the ALTER moves the table to the %s engine; sluice copies into InnoDB tables only: run it with the server's own ALTER TABLE", e)
		}
	}
	return nil
}

// CheckColumns refuses an ALTER that names a column the table lacks, before
// any count query trips on it, and before the copy path maps columns by
// name: a name the server would take for a column that sluice does not
// (dbconn.SameName) must stop the run, not leave a column uncopied.
func CheckColumns(t *schema.Table, a *ddl.Alter) error {
	// Names the clause made (added, or renamed to) before it names them.
	made := map[string]bool{}
	for _, spec := range a.Specs {
		var newName string
		switch spec.Tp {
		case ast.AlterTableAddColumns:
			for _, col := range spec.NewColumns {
				if _, ok := t.Column(col.Name.Name.O); ok && spec.IfNotExists {
					return fmt.Errorf("the ALTER adds column %s IF NOT EXISTS, and %s has it: the server would skip that clause, and sluice would take the column for a new one; leave the clause out", col.Name.Name.O, t.Name)
				}
				made[dbconn.NameKey(col.Name.Name.O)] = true
			}
			continue
		case ast.AlterTableRenameColumn:
			newName = spec.NewColumnName.Name.O
		case ast.AlterTableChangeColumn:
			if len(spec.NewColumns) == 1 {
				newName = spec.NewColumns[0].Name.Name.O
			}
		case ast.AlterTableDropColumn, ast.AlterTableModifyColumn, ast.AlterTableAlterColumn:
		default:
			continue
		}
		name := ""
		if spec.OldColumnName != nil {
			name = spec.OldColumnName.Name.O
		} else if len(spec.NewColumns) == 1 {
			name = spec.NewColumns[0].Name.Name.O
		}
		if _, ok := t.Column(name); name != "" && !ok && !made[dbconn.NameKey(name)] {
			return fmt.Errorf("the ALTER names column %s, which %s does not have: spell it as SHOW CREATE TABLE does", name, t.Name)
		}
		if newName != "" {
			made[dbconn.NameKey(newName)] = true
		}
	}
	return nil
}
