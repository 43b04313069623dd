package ddl

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// VolatileKind says what the value of an added column depends on besides the
// row it is computed for.
type VolatileKind int

const (
	// VolatileRandom is a function that returns a different value at each
	// call: UUID(), UUID_SHORT(), RAND(), RANDOM_BYTES().
	VolatileRandom VolatileKind = iota + 1
	// VolatileSequence is a number drawn from a counter as the row is
	// inserted: AUTO_INCREMENT (SERIAL too), or a sequence's NEXTVAL.
	VolatileSequence
	// VolatileTime is the time of the insert: CURRENT_TIMESTAMP, NOW(),
	// LOCALTIME, CURDATE(), SYSDATE(), UTC_TIMESTAMP(), UNIX_TIMESTAMP()...
	// Unlike the other kinds it may be acceptable: a row gets the time sluice
	// last copied it rather than the time of the ALTER.
	VolatileTime
	// VolatileSession is a property of the inserting connection, which
	// differs between sluice's workers: CONNECTION_ID(), LAST_INSERT_ID()...
	VolatileSession
)

// String returns "random", "sequence", "time" or "session".
func (k VolatileKind) String() string {
	switch k {
	case VolatileRandom:
		return "random"
	case VolatileSequence:
		return "sequence"
	case VolatileTime:
		return "time"
	case VolatileSession:
		return "session"
	}
	return fmt.Sprintf("VolatileKind(%d)", int(k))
}

// Volatile is an added column whose value the server computes anew at each
// insert. sluice's copy fills a column that has no source column with its
// default as it inserts the row, and inserts the row again each time the
// application changes it; such a column gets a new value each time, and not
// the values a native ALTER would give it in one pass over the table.
type Volatile struct {
	// Column is the added column's name as written in the ALTER.
	Column string
	// Kind says what the value depends on.
	Kind VolatileKind
	// Cause is what makes the value volatile, as SQL: "AUTO_INCREMENT", or a
	// function as the parser names it, e.g. "UUID()", "CURRENT_TIMESTAMP()"
	// (NOW() and LOCALTIME included).
	Cause string
	// Alternative suggests how to reach the same end without it.
	Alternative string
}

// String says what goes wrong, e.g. "column u: UUID() gives the row a new
// value each time sluice copies it, and it copies a row again whenever the
// application changes it".
func (v Volatile) String() string {
	const again = "sluice copies it, and it copies a row again whenever the application changes it"
	switch v.Kind {
	case VolatileSequence:
		if v.Cause == "AUTO_INCREMENT" {
			return fmt.Sprintf("column %s: AUTO_INCREMENT numbers the rows in the order sluice copies them, not in key order, and gives a row a new number each time "+again, v.Column)
		}
		return fmt.Sprintf("column %s: %s gives the row a new number each time "+again, v.Column, v.Cause)
	case VolatileTime:
		return fmt.Sprintf("column %s: %s is the time sluice copies the row, not the time of the ALTER, and it copies a row again whenever the application changes it", v.Column, v.Cause)
	case VolatileSession:
		return fmt.Sprintf("column %s: %s depends on which of sluice's connections copies the row, and it copies a row again whenever the application changes it", v.Column, v.Cause)
	}
	return fmt.Sprintf("column %s: %s gives the row a new value each time "+again, v.Column, v.Cause)
}

// Suggestions for Volatile.Alternative.
const (
	altFill = "add the column with a constant default (or NULL) and fill it afterwards, " +
		"or run the ALTER natively (sluice --method inplace) if the server accepts that"
	altAutoIncrement = "add the column without AUTO_INCREMENT, number the rows yourself, " +
		"then make it AUTO_INCREMENT with MODIFY in a second run"
	altTime = "to give existing rows one time, add the column with that time as a constant default and change the default afterwards; " +
		"or run the ALTER natively (sluice --method inplace) if the server accepts that"
)

// volatileFuncs are the built-in functions whose result changes from one
// insert to the next, by lower-case name. unix_timestamp counts only
// without arguments.
var volatileFuncs = map[string]VolatileKind{
	"uuid": VolatileRandom, "uuid_short": VolatileRandom, "uuid_v4": VolatileRandom, "uuid_v7": VolatileRandom,
	"rand": VolatileRandom, "random_bytes": VolatileRandom, "sys_guid": VolatileRandom,

	"nextval": VolatileSequence,

	"now": VolatileTime, "current_timestamp": VolatileTime, "localtime": VolatileTime, "localtimestamp": VolatileTime,
	"sysdate": VolatileTime, "curdate": VolatileTime, "current_date": VolatileTime, "curtime": VolatileTime,
	"current_time": VolatileTime, "utc_date": VolatileTime, "utc_time": VolatileTime, "utc_timestamp": VolatileTime,
	"unix_timestamp": VolatileTime,

	"connection_id": VolatileSession, "last_insert_id": VolatileSession, "ps_current_thread_id": VolatileSession,
	"row_count": VolatileSession, "found_rows": VolatileSession, "lastval": VolatileSession,
	"current_user": VolatileSession, "user": VolatileSession, "session_user": VolatileSession,
	"system_user": VolatileSession, "current_role": VolatileSession,
}

// volatiles returns what makes an added column's value volatile: its
// AUTO_INCREMENT (or AUTO_RANDOM) option and the volatile functions in its
// DEFAULT expression, nested calls included, in the order written.
func volatiles(col *ast.ColumnDef) []Volatile {
	var out []Volatile
	add := func(kind VolatileKind, cause string) {
		alt := altFill
		switch {
		case kind == VolatileTime:
			alt = altTime
		case cause == "AUTO_INCREMENT":
			alt = altAutoIncrement
		}
		out = append(out, Volatile{Column: col.Name.Name.O, Kind: kind, Cause: cause, Alternative: alt})
	}
	for _, o := range col.Options {
		switch o.Tp {
		case ast.ColumnOptionAutoIncrement:
			add(VolatileSequence, "AUTO_INCREMENT")
		case ast.ColumnOptionAutoRandom:
			add(VolatileRandom, "AUTO_RANDOM")
		case ast.ColumnOptionDefaultValue, ast.ColumnOptionNoOption: // ALTER COLUMN ... SET DEFAULT has no type
			if o.Expr == nil {
				continue
			}
			var vr varRefs
			o.Expr.Accept(&vr)
			for _, v := range vr {
				at := "@"
				if v.IsSystem {
					at = "@@"
				}
				add(VolatileSession, at+v.Name)
			}
			var fc funcCalls
			o.Expr.Accept(&fc)
			for _, call := range fc {
				kind, ok := volatileFuncs[call.FnName.L]
				if !ok || (call.FnName.L == "unix_timestamp" && len(call.Args) > 0) {
					continue
				}
				add(kind, strings.ToUpper(call.FnName.O)+"()")
			}
		}
	}
	return out
}

// hasAutoIncrement reports whether a column definition says AUTO_INCREMENT.
func hasAutoIncrement(col *ast.ColumnDef) bool {
	for _, o := range col.Options {
		if o.Tp == ast.ColumnOptionAutoIncrement {
			return true
		}
	}
	return false
}

// varRefs collects the variables an expression reads (@@sql_mode, @x):
// MariaDB takes them in a DEFAULT, where they read the session that inserts
// the row (sluice's), not the one that ran the ALTER.
type varRefs []*ast.VariableExpr

func (v *varRefs) Enter(n ast.Node) (ast.Node, bool) {
	if x, ok := n.(*ast.VariableExpr); ok {
		*v = append(*v, x)
	}
	return n, false
}

func (v *varRefs) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// funcCalls collects the function calls in an expression, outer ones first.
type funcCalls []*ast.FuncCallExpr

func (f *funcCalls) Enter(n ast.Node) (ast.Node, bool) {
	if call, ok := n.(*ast.FuncCallExpr); ok {
		*f = append(*f, call)
	}
	return n, false
}

func (f *funcCalls) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// DefaultExpression reports whether a column definition's DEFAULT is an
// expression rather than a literal (a negative number included) or the
// current time written alone, whether that expression reads the row's other
// columns, and the functions it calls (lower case, nested calls included).
// A literal in parentheses is taken for a literal: the parser does not keep
// the parentheses.
func DefaultExpression(col *ast.ColumnDef) (expr, readsRow bool, calls []string) {
	for _, o := range col.Options {
		if o.Tp != ast.ColumnOptionDefaultValue || o.Expr == nil {
			continue
		}
		switch e := o.Expr.(type) {
		case ast.ValueExpr:
			continue
		case *ast.UnaryOperationExpr:
			if _, ok := e.V.(ast.ValueExpr); ok {
				continue
			}
		case *ast.FuncCallExpr:
			switch e.FnName.L {
			case "current_timestamp", "now", "localtime", "localtimestamp":
				continue
			}
		}
		var r rowReads
		o.Expr.Accept(&r)
		expr, readsRow, calls = true, readsRow || r.row, append(calls, r.calls...)
	}
	return expr, readsRow, calls
}

// rowReads notes column references and function calls.
type rowReads struct {
	row   bool
	calls []string
}

func (r *rowReads) Enter(n ast.Node) (ast.Node, bool) {
	switch n := n.(type) {
	case *ast.ColumnNameExpr:
		r.row = true
	case *ast.FuncCallExpr:
		r.calls = append(r.calls, n.FnName.L)
	}
	return n, false
}

func (r *rowReads) Leave(n ast.Node) (ast.Node, bool) { return n, true }
