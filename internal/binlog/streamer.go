package binlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // the parser needs a value driver

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// ErrTableChanged means the table's definition changed, or it was written in a
// way the binlog cannot show row by row, while sluice was reading its changes.
var ErrTableChanged = errors.New("the table changed under the migration")

// Sink receives the keys of changed rows, in binlog order.
type Sink interface {
	Add(keys ...rowkey.Key)
}

// Config configures a Streamer.
type Config struct {
	Conn     dbconn.Config
	TLS      *tls.Config
	Database string
	Table    string
	// Columns is the table's column count; a row event with another count
	// means the table was altered behind sluice's back.
	Columns int
	Key     rowkey.Cols
	Sink    Sink
}

// Streamer reads the binlog from a start position in a goroutine of its own.
// Start it with Start; it runs until Close, or until an error that Err then
// returns. Position and WaitFor are safe for concurrent use.
type Streamer struct {
	cfg    Config
	syncer *replication.BinlogSyncer

	mu      sync.Mutex // protects pos, err, lastTS
	pos     Position
	err     error
	lastTS  time.Time
	changed chan struct{} // closed and replaced at every position change

	cancel context.CancelFunc
	done   chan struct{}
}

// Start connects as a replica and streams from start.
func Start(ctx context.Context, cfg Config, start Position) (*Streamer, error) {
	if cfg.Sink == nil || len(cfg.Key) == 0 {
		return nil, errors.New("binlog: Sink and Key are required")
	}
	s := &Streamer{cfg: cfg, pos: start, changed: make(chan struct{}), done: make(chan struct{})}
	db, table := []byte(cfg.Database), []byte(cfg.Table)
	scfg := replication.BinlogSyncerConfig{
		ServerID:                uint32(1_000_000_000 + rand.IntN(1_000_000_000)),
		Flavor:                  mysql.MySQLFlavor,
		Host:                    cfg.Conn.Host,
		Port:                    uint16(cfg.Conn.Port),
		User:                    cfg.Conn.User,
		Password:                cfg.Conn.Password,
		TLSConfig:               cfg.TLS,
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         time.Second,
		ReadTimeout:             10 * time.Second,
		MaxReconnectAttempts:    10,
		Logger:                  slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Decode the rows of our table only: under a heavy load most events
		// belong to other tables and are skipped without being parsed.
		RowsEventDecodeFunc: func(re *replication.RowsEvent, data []byte) error {
			pos, err := re.DecodeHeader(data)
			if err != nil {
				return err
			}
			if string(re.Table.Table) != string(table) || string(re.Table.Schema) != string(db) {
				return nil
			}
			return re.DecodeData(pos, data)
		},
	}
	s.syncer = replication.NewBinlogSyncer(scfg)
	stream, err := s.syncer.StartSync(mysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		s.syncer.Close()
		return nil, fmt.Errorf("start reading the binlog at %s: %w", start, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.run(rctx, stream)
	return s, nil
}

func (s *Streamer) run(ctx context.Context, stream *replication.BinlogStreamer) {
	defer close(s.done)
	file := s.Position().File
	for {
		ev, err := stream.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("read binlog: %w", err))
			}
			return
		}
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			file = string(r.NextLogName)
			s.advance(Position{File: file, Pos: uint32(r.Position)}, ev.Header.Timestamp)
			continue
		}
		if err := s.handle(ev); err != nil {
			s.fail(err)
			return
		}
		if ev.Header.LogPos > 0 {
			s.advance(Position{File: file, Pos: ev.Header.LogPos}, ev.Header.Timestamp)
		}
	}
}

func (s *Streamer) handle(ev *replication.BinlogEvent) error {
	switch e := ev.Event.(type) {
	case *replication.RowsEvent:
		if e.Rows == nil || string(e.Table.Table) != s.cfg.Table || string(e.Table.Schema) != s.cfg.Database {
			return nil
		}
		if int(e.ColumnCount) != s.cfg.Columns {
			return fmt.Errorf("%w: a row event has %d columns, the table had %d", ErrTableChanged, e.ColumnCount, s.cfg.Columns)
		}
		keys := make([]rowkey.Key, 0, len(e.Rows))
		for _, row := range e.Rows {
			k, err := s.cfg.Key.FromBinlog(row)
			if err != nil {
				return fmt.Errorf("binlog row of %s.%s: %w", s.cfg.Database, s.cfg.Table, err)
			}
			keys = append(keys, k)
		}
		s.cfg.Sink.Add(keys...)
	case *replication.QueryEvent:
		return s.checkQuery(string(e.Schema), string(e.Query))
	}
	return nil
}

// checkQuery fails on a DDL statement or a statement-format DML on the table.
func (s *Streamer) checkQuery(schema, query string) error {
	q := strings.TrimSpace(query)
	lower := strings.ToLower(q)
	if q == "BEGIN" || q == "COMMIT" || !strings.Contains(lower, strings.ToLower(s.cfg.Table)) {
		return nil
	}
	if !strings.EqualFold(schema, s.cfg.Database) && !strings.Contains(lower, strings.ToLower(s.cfg.Database)) {
		// Run in another database without naming ours: its unqualified
		// names are that database's tables.
		return nil
	}
	stmts, _, err := parser.New().Parse(q, "", "")
	if err != nil {
		// Not something the parser knows; it names the table, so be safe.
		return fmt.Errorf("%w: the binlog holds a statement on it that sluice cannot read: %.200s", ErrTableChanged, q)
	}
	for _, st := range stmts {
		var names []*ast.TableName
		kind := ""
		switch x := st.(type) {
		case *ast.AlterTableStmt:
			names, kind = []*ast.TableName{x.Table}, "ALTER TABLE"
		case *ast.DropTableStmt:
			names, kind = x.Tables, "DROP TABLE"
		case *ast.TruncateTableStmt:
			names, kind = []*ast.TableName{x.Table}, "TRUNCATE TABLE"
		case *ast.RenameTableStmt:
			for _, t := range x.TableToTables {
				names = append(names, t.OldTable)
			}
			kind = "RENAME TABLE"
		case *ast.CreateIndexStmt:
			names, kind = []*ast.TableName{x.Table}, "CREATE INDEX"
		case *ast.DropIndexStmt:
			names, kind = []*ast.TableName{x.Table}, "DROP INDEX"
		case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
			names, kind = tableRefs(st), "a statement-format write (binlog_format=STATEMENT in a session)"
		}
		for _, n := range names {
			db := n.Schema.O
			if db == "" {
				db = schema
			}
			if strings.EqualFold(n.Name.O, s.cfg.Table) && db == s.cfg.Database {
				return fmt.Errorf("%w: %s on %s.%s during the migration", ErrTableChanged, kind, s.cfg.Database, s.cfg.Table)
			}
		}
	}
	return nil
}

type tableCollector struct{ names []*ast.TableName }

func (c *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		c.names = append(c.names, t)
	}
	return n, false
}
func (c *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func tableRefs(st ast.StmtNode) []*ast.TableName {
	c := &tableCollector{}
	st.Accept(c)
	return c.names
}

func (s *Streamer) advance(p Position, ts uint32) {
	s.mu.Lock()
	if p.Compare(s.pos) > 0 {
		s.pos = p
	}
	if ts > 0 {
		s.lastTS = time.Unix(int64(ts), 0)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Streamer) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Position returns the end of the last event fully handled.
func (s *Streamer) Position() Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos
}

// Err returns the error that stopped the streamer, or nil while it runs.
func (s *Streamer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Lag returns how far behind the newest event's timestamp the streamer is.
// Heartbeats keep it near zero on an idle server.
func (s *Streamer) Lag() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastTS.IsZero() {
		return 0
	}
	return max(0, time.Since(s.lastTS).Truncate(time.Second))
}

// WaitFor blocks until every event before p has been handed to the sink, the
// streamer fails, or ctx ends.
func (s *Streamer) WaitFor(ctx context.Context, p Position) error {
	for {
		s.mu.Lock()
		pos, err, ch := s.pos, s.err, s.changed
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if pos.Compare(p) >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the binlog to reach %s (at %s): %w", p, pos, ctx.Err())
		case <-ch:
		}
	}
}

// Close stops streaming and waits for the reader goroutine to end.
func (s *Streamer) Close() {
	s.cancel()
	s.syncer.Close()
	<-s.done
}
