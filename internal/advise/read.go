package advise

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/plan"
)

// advised are the variables Advise recommends; a server lacks those of
// later versions.
var advised = []string{"innodb_ddl_threads", "innodb_ddl_buffer_size", "innodb_parallel_read_threads", "innodb_log_writer_threads"}

// writeCounters are the status counters whose growth is the write load.
var writeCounters = []string{"Com_insert", "Com_insert_select", "Com_update", "Com_update_multi", "Com_delete", "Com_delete_multi", "Com_replace", "Com_replace_select", "Com_load"}

// Target says what to size the index build for: SortBytes of index
// entries when above 0, else Database.Table's data when Table is given (it
// must exist), else the server's largest InnoDB table's.
type Target struct {
	Database, Table string
	SortBytes       int64
}

// Read reads what Advise needs from a live server, sampling its write load
// over window.
func Read(ctx context.Context, db *sql.DB, host string, window time.Duration, target Target) (Server, error) {
	s := Server{Address: host, Current: map[string]string{}}
	var err error
	if s.Facts, err = plan.ReadFacts(ctx, db, host); err != nil {
		return s, err
	}
	var logBin int
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size, @@log_bin").Scan(&s.BufferPool, &logBin); err != nil {
		return s, fmt.Errorf("read the buffer pool and binlog settings: %w", err)
	}
	s.Binlog = logBin == 1
	vars, err := variables(ctx, db, "SHOW GLOBAL VARIABLES", advised)
	if err != nil {
		return s, err
	}
	for k, v := range vars {
		s.Current[k] = v
	}
	if target.SortBytes > 0 {
		s.SortBytes, s.SortWhat = target.SortBytes, "as given"
	} else if err := s.sortSize(ctx, db, target.Database, target.Table); err != nil {
		return s, err
	}
	s.Writes, err = sample(ctx, db, window)
	return s, err
}

// sortSize sizes the index build: database.table's data, or the largest
// InnoDB table's.
func (s *Server) sortSize(ctx context.Context, db *sql.DB, database, table string) error {
	const q = "SELECT TABLE_SCHEMA, TABLE_NAME, DATA_LENGTH FROM information_schema.TABLES WHERE ENGINE = 'InnoDB' AND "
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// MySQL caches these sizes for a day by default; MariaDB has no such
	// variable (the error is of no matter).
	conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0")
	var schema, name string
	if table != "" {
		err = conn.QueryRowContext(ctx, q+"TABLE_SCHEMA = ? AND TABLE_NAME = ?", database, table).Scan(&schema, &name, &s.SortBytes)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no InnoDB table %s.%s on the server: name an existing table, or leave --table out to size for the largest", database, table)
		}
		s.SortWhat = fmt.Sprintf("the data of %s.%s, which bounds its index entries", schema, name)
	} else {
		err = conn.QueryRowContext(ctx, q+"TABLE_SCHEMA NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema') ORDER BY DATA_LENGTH DESC LIMIT 1").Scan(&schema, &name, &s.SortBytes)
		if errors.Is(err, sql.ErrNoRows) {
			s.SortWhat = "no user table on the server"
			return nil
		}
		s.SortWhat = fmt.Sprintf("the data of the largest table, %s.%s, which bounds its index entries", schema, name)
	}
	if err != nil {
		return fmt.Errorf("read table sizes: %w", err)
	}
	return nil
}

// sample measures the write load over window: the write statements and redo
// bytes a second, and the sessions running (Threads_running every 100 ms,
// less the sampler's own).
func sample(ctx context.Context, db *sql.DB, window time.Duration) (Activity, error) {
	a := Activity{Window: window, WindowSeconds: window.Seconds()}
	counters := append(append([]string(nil), writeCounters...), "Innodb_os_log_written")
	before, err := variables(ctx, db, "SHOW GLOBAL STATUS", counters)
	if err != nil {
		return a, err
	}
	start := time.Now()
	var sum float64
	var n int
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < window {
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-tick.C:
		}
		run, err := variables(ctx, db, "SHOW GLOBAL STATUS", []string{"Threads_running"})
		if err != nil {
			return a, err
		}
		r, _ := strconv.Atoi(run["Threads_running"])
		r = max(r-1, 0)
		sum, n = sum+float64(r), n+1
		a.PeakRunning = max(a.PeakRunning, r)
	}
	after, err := variables(ctx, db, "SHOW GLOBAL STATUS", counters)
	if err != nil {
		return a, err
	}
	secs := time.Since(start).Seconds()
	a.WindowSeconds = secs // the rates are over the time measured
	// Each SHOW counts as nothing here: it is no write statement.
	for _, c := range writeCounters {
		a.WritesPerSec += delta(before, after, c) / secs
	}
	a.RedoPerSec = delta(before, after, "Innodb_os_log_written") / secs
	if n > 0 {
		a.Running = sum / float64(n)
	}
	return a, nil
}

func delta(before, after map[string]string, name string) float64 {
	b, err1 := strconv.ParseFloat(before[name], 64)
	a, err2 := strconv.ParseFloat(after[name], 64)
	if err1 != nil || err2 != nil || a < b {
		return 0
	}
	return a - b
}

// variables reads the named rows of a SHOW ... VARIABLES/STATUS; a name the
// server lacks is absent from the map.
func variables(ctx context.Context, db *sql.DB, show string, names []string) (map[string]string, error) {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	rows, err := db.QueryContext(ctx, show+" WHERE Variable_name IN ("+strings.Join(quoted, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", show, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}
