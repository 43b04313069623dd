package migration

// CHECK constraints on the copy path. On MySQL a constraint's name is unique
// in its database and the original holds it until the swap, so the new
// table, made with CREATE TABLE LIKE, has the original's CHECK constraints
// under generated names; MariaDB keeps the names (they are a table's own).

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
)

// The server's errors for a CHECK constraint, or any constraint, it cannot
// find by name.
const (
	errCheckNotFound      = 3821
	errConstraintNotFound = 3940
)

// namedCheck returns the CHECK constraint the ALTER drops or alters by name
// (DROP CHECK, DROP CONSTRAINT, ALTER CHECK) that the server's message
// names, else the first, and that clause.
func namedCheck(a *ddl.Alter, message string) (name, clause string) {
	for _, spec := range a.Specs {
		if (spec.Tp == ast.AlterTableDropCheck || spec.Tp == ast.AlterTableAlterCheck) && spec.Constraint != nil {
			if name == "" || strings.Contains(message, "'"+spec.Constraint.Name+"'") {
				name, clause = spec.Constraint.Name, ddl.Text(spec)
			}
		}
	}
	return name, clause
}

// noteNamedChecks finds the CHECK constraints the user named on the
// original: the new table, made with CREATE TABLE LIKE, has them under
// generated names, since MySQL keeps a constraint name unique in a database
// (the original holds it) and cannot rename one. The rows are not affected;
// the operator is told.
func (r *Runner) noteNamedChecks(ctx context.Context) error {
	if r.vars.Flavor == dbconn.MariaDB {
		// Constraint names are a table's own there: CREATE TABLE LIKE
		// keeps them.
		return nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_TYPE = 'CHECK' ORDER BY CONSTRAINT_NAME`, r.cfg.Database, r.orig.Name)
	if err != nil {
		return fmt.Errorf("read the CHECK constraints of %s: %w", r.orig.Name, err)
	}
	defer rows.Close()
	generated := regexp.MustCompile(`^` + regexp.QuoteMeta(r.orig.Name) + `_chk_[0-9]+$`)
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		if !generated.MatchString(name) {
			r.res.RenamedChecks = append(r.res.RenamedChecks, name)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(r.res.RenamedChecks) > 0 {
		r.log.Warn("the new table's CHECK constraints keep their conditions but take generated names (MySQL keeps a constraint name unique in a database and cannot rename one)",
			"named", strings.Join(r.res.RenamedChecks, ","))
	}
	return nil
}
