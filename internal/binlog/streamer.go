package binlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

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

// PresenceSink is a Sink that also learns, after each Add, whether each
// key's row exists after the change: false for a deleted row and for the old
// key of a row whose key changed, true otherwise. The last word on a key is
// its row's state once every event is read.
type PresenceSink interface {
	Sink
	Present(keys []rowkey.Key, present []bool)
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
	// FoldCase makes Database and Table match the names in the binlog
	// without regard to letter case, in row events and in DDL statements.
	// Set it when the server's lower_case_table_names is 1 or 2; with 0
	// names are case-sensitive (`Orders` and `orders` are two tables) and
	// are compared byte for byte.
	FoldCase bool
	// CascadeParents are tables of Database whose foreign keys CASCADE or
	// SET NULL into Table: a statement-format write to one of them changes
	// Table's rows without a row event, and stops the migration.
	CascadeParents []string
	// Writers are the views, tables with triggers and stored routines
	// that may write the table (any database): a statement-format
	// statement that names one may change its rows without row events,
	// and stops the streamer (ErrTableChanged).
	Writers []string
	// ChildrenFollow: a foreign key added towards Table (ALTER TABLE ...
	// ADD FOREIGN KEY, CREATE TABLE ... REFERENCES) does not stop the
	// migration: the cut-over re-points the children's keys to the new
	// table, or refuses one it did not lock (migration/children.go).
	// Without it such a key stops the migration, since a RENAME would move
	// it to the old table.
	ChildrenFollow bool
	// Flavor is the server's. On MariaDB the stream is read as a MariaDB
	// replica reads it, GTID events included: a reader that does not say it
	// understands them gets them replaced with BEGIN and dummy events, which
	// MariaDB 10.11 cannot do for an XA transaction and ends the stream.
	Flavor dbconn.Flavor
	// ReconnectFor is how long the streamer tries to re-establish a lost
	// binlog connection before it fails (0: DefaultReconnectFor; negative:
	// it fails at once). The time counts from the loss until events flow
	// again.
	ReconnectFor time.Duration
	// Logger, if set, gets a line for each reconnect attempt, with the
	// error and the position reading resumes from.
	Logger *slog.Logger
}

// DefaultReconnectFor is Config.ReconnectFor's default.
const DefaultReconnectFor = 5 * time.Minute

// Streamer reads the binlog from a start position in a goroutine of its own.
// Start it with Start; it runs until Close, or until an error that Err then
// returns. Position and WaitFor are safe for concurrent use.
//
// A lost connection (see dbconn.ConnectionLost) is re-established from
// Position with a new connection, for up to Config.ReconnectFor; any other
// error stops the streamer.
type Streamer struct {
	// rebuilds counts the OPTIMIZE and REPAIR statements of the table read
	// (newwriters.go): a rebuild gives the table another InnoDB id.
	rebuilds atomic.Int64
	cfg      Config
	scfg     replication.BinlogSyncerConfig // for each connection
	log      *slog.Logger

	// Only the reader goroutine uses these.
	link *link // the current connection; nil while reconnecting
	// checksum is whether the events of the current binlog file end with a
	// CRC32, as its format description says.
	checksum bool
	// inTx: an event of a transaction was read and its end was not;
	// inBegin: the transaction began with BEGIN (or XA START); inXA: with
	// XA START.
	inTx, inBegin, inXA bool
	lostAt              time.Time // when the connection was lost; zero while events flow
	attempts            int       // reconnect attempts since lostAt

	connID atomic.Uint32 // the server's id of the current connection, 0 while none

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
	s := &Streamer{cfg: cfg, pos: start, changed: make(chan struct{}), done: make(chan struct{}), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.scfg = replication.BinlogSyncerConfig{
		// One server id for every connection of the streamer.
		ServerID: uint32(1_000_000_000 + rand.IntN(1_000_000_000)),
		// The name SHOW REPLICAS lists it under: discovery skips it.
		Localhost:               dbconn.ReaderHost,
		Flavor:                  binlogFlavor(cfg.Flavor),
		Host:                    cfg.Conn.Host,
		Port:                    uint16(cfg.Conn.Port),
		User:                    cfg.Conn.User,
		Password:                cfg.Conn.Password,
		TLSConfig:               cfg.TLS,
		TimestampStringLocation: time.UTC,
		// DECIMAL key values exactly (the default is a float64).
		UseDecimal:      true,
		HeartbeatPeriod: time.Second,
		ReadTimeout:     10 * time.Second,
		// The streamer reconnects itself (reconnect.go): go-mysql's retry
		// resumes from the last event it received, not from a position
		// sluice chose, and does not retry a server's error packet.
		DisableRetrySync: true,
		Logger:           slog.New(slog.DiscardHandler),
		// Decode the rows of our table only: under a heavy load most events
		// belong to other tables and are skipped without being parsed. The
		// parser of a compressed transaction's payload inherits this.
		RowsEventDecodeFunc: func(re *replication.RowsEvent, data []byte) error {
			pos, err := re.DecodeHeader(data)
			if err != nil {
				return err
			}
			if !s.cfg.isTable(re.Table.Schema, re.Table.Table) {
				return nil
			}
			return re.DecodeData(pos, data)
		},
		// go-mysql creates a zstd decoder for each payload and decodes it
		// with DecodeAll, which uses one block decoder: the default (one per
		// CPU) would allocate the others for nothing.
		PayloadDecoderConcurrency: 1,
	}
	stream, err := s.connect(ctx, start)
	if err != nil {
		return nil, fmt.Errorf("start reading the binlog at %s: %w", start, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.run(rctx, stream)
	return s, nil
}

// run reads until ctx ends or an error other than a lost connection.
func (s *Streamer) run(ctx context.Context, stream *replication.BinlogStreamer) {
	defer close(s.done)
	defer func() {
		if s.link != nil {
			s.link.syncer.Close()
		}
	}()
	for {
		err := s.read(ctx, stream)
		if ctx.Err() != nil {
			return
		}
		var lost *lostError
		if !errors.As(err, &lost) {
			s.fail(err)
			return
		}
		s.link.drop()
		s.link = nil
		s.connID.Store(0)
		if stream, err = s.reconnect(ctx, lost.err); err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
	}
}

// read handles the stream's events until the stream fails (a *lostError
// when the connection broke) or an event stops the streamer.
func (s *Streamer) read(ctx context.Context, stream *replication.BinlogStreamer) error {
	file := s.Position().File
	s.atEdge() // a connection starts at a transaction's edge
	for {
		ev, err := stream.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if dbconn.ConnectionLost(err) {
				return &lostError{err}
			}
			return fmt.Errorf("read binlog: %w", err)
		}
		ts := ev.Header.Timestamp
		switch e := ev.Event.(type) {
		case *replication.RotateEvent:
			// Also the first event of each connection, naming its start.
			file = string(e.NextLogName)
			s.atEdge()
			s.advance(Position{File: file, Pos: uint32(e.Position)}, ts)
			continue
		case *replication.FormatDescriptionEvent:
		default:
			s.lostAt, s.attempts = time.Time{}, 0 // events flow
		}
		if err := s.handle(ev); err != nil {
			return err
		}
		// The position moves past an event only once it is handled whole
		// (for a compressed transaction, once every event inside it is),
		// and only to the end of a transaction.
		if s.endsTx(ev) && ev.Header.LogPos > 0 {
			s.advance(Position{File: file, Pos: ev.Header.LogPos}, ts)
		} else {
			s.advance(Position{}, ts)
		}
	}
}

// atEdge records that no transaction is open.
func (s *Streamer) atEdge() { s.inTx, s.inBegin, s.inXA = false, false, false }

// mariadbPreparedXA flags a MariaDB GTID event that starts the part of an XA
// transaction logged at its XA PREPARE (FL_PREPARED_XA).
const mariadbPreparedXA = 64

func binlogFlavor(f dbconn.Flavor) string {
	if f == dbconn.MariaDB {
		return mysql.MariaDBFlavor
	}
	return mysql.MySQLFlavor
}

// endsTx reports whether no transaction is open after ev, so that reading
// again from its end loses nothing and needs no earlier event (a row event
// needs the table map event before it, in the same transaction). A
// transaction starts with its GTID event (or BEGIN) and ends with its XID
// event, XA PREPARE, COMMIT or ROLLBACK, or with its only statement (a DDL).
// A compressed transaction is one event.
func (s *Streamer) endsTx(ev *replication.BinlogEvent) bool {
	switch e := ev.Event.(type) {
	case *replication.XIDEvent, *replication.TransactionPayloadEvent:
		s.atEdge()
		return true
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query[:min(len(e.Query), 64)]))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			s.inTx, s.inBegin = true, true
			return false
		case len(q) >= 8 && strings.EqualFold(q[:8], "XA START"):
			s.inTx, s.inBegin, s.inXA = true, true, true
			return false
		case strings.EqualFold(q, "COMMIT") || strings.EqualFold(q, "ROLLBACK"):
		case s.inBegin:
			return false // a statement inside BEGIN ... COMMIT
		}
		s.atEdge()
		return true
	case *replication.MariadbGTIDEvent:
		// A MariaDB transaction starts here; one flagged standalone (a DDL,
		// XA COMMIT or ROLLBACK) is its one statement, any other ends with
		// its XID event, COMMIT, ROLLBACK or XA PREPARE.
		s.inTx, s.inBegin, s.inXA = true, !e.IsStandalone(), e.Flags&mariadbPreparedXA != 0
		return false
	case *replication.FormatDescriptionEvent, *replication.PreviousGTIDsEvent, *replication.HeartbeatEvent,
		*replication.MariadbGTIDListEvent, *replication.MariadbBinlogCheckPointEvent:
		return !s.inTx
	}
	switch ev.Header.EventType {
	case replication.XA_PREPARE_LOG_EVENT:
		s.atEdge()
		return true
	case replication.STOP_EVENT:
		return !s.inTx
	}
	s.inTx = true
	return false
}

// handle hands the keys of a row event on the table to the sink, and fails
// on an event that shows the table changed (see checkQuery). The events of a
// compressed transaction (a TransactionPayloadEvent, which go-mysql has
// already decoded with the same row filter) are handled in their order, as if
// they stood in the binlog themselves. Their positions are not used: the
// caller advances to the end of the payload once all are handled.
func (s *Streamer) handle(ev *replication.BinlogEvent) error {
	switch e := ev.Event.(type) {
	case *replication.RowsEvent:
		return s.handleRows(ev.Header.EventType, e)
	case *replication.QueryEvent:
		return s.checkQuery(string(e.Schema), string(e.Query), sqlMode(e.StatusVars))
	case *replication.ExecuteLoadQueryEvent:
		schema, query, mode, err := loadQuery(ev.RawData, s.checksum)
		if err != nil {
			return fmt.Errorf("binlog event at %d: %w", ev.Header.LogPos, err)
		}
		return s.checkQuery(schema, query, mode)
	case *replication.TransactionPayloadEvent:
		for i, inner := range e.Events {
			if err := s.handle(inner); err != nil {
				return fmt.Errorf("event %d of the compressed transaction ending at %d: %w", i+1, ev.Header.LogPos, err)
			}
			// The transaction's own edges (its XA START) are inside; the
			// payload as a whole ends it (endsTx, after handle).
			s.endsTx(inner)
		}
	case *replication.FormatDescriptionEvent:
		s.checksum = e.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
	}
	return nil
}

// handleRows hands the keys of every row image of e to the sink when e is a
// change of the table. e.Rows is nil when the decode filter skipped it.
//
// With binlog_row_image=MINIMAL (or NOBLOB) a session logs only the key in an
// update's before image and only the changed columns in its after image: an
// after image without the key is of the row the before image names, whose
// key did not change. Any other image without the key is refused.
func (s *Streamer) handleRows(typ replication.EventType, e *replication.RowsEvent) error {
	if e.Rows == nil || e.Table == nil || !s.cfg.isTable(e.Table.Schema, e.Table.Table) {
		return nil
	}
	if int(e.ColumnCount) != s.cfg.Columns {
		return fmt.Errorf("%w: a row event has %d columns, the table had %d", ErrTableChanged, e.ColumnCount, s.cfg.Columns)
	}
	update := typ == replication.UPDATE_ROWS_EVENTv1 || typ == replication.UPDATE_ROWS_EVENTv2 ||
		typ == replication.PARTIAL_UPDATE_ROWS_EVENT || typ == replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1
	del := typ == replication.DELETE_ROWS_EVENTv0 || typ == replication.DELETE_ROWS_EVENTv1 ||
		typ == replication.DELETE_ROWS_EVENTv2 || typ == replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1
	keys := make([]rowkey.Key, 0, len(e.Rows))
	present := make([]bool, 0, len(e.Rows))
	for i, row := range e.Rows {
		if update && i%2 == 1 {
			if name := s.defaultedKeySkipped(e, i); name != "" {
				return fmt.Errorf("binlog row of %s.%s: MariaDB logged an update whose after image leaves out key column %s, which has a DEFAULT (binlog_row_image=MINIMAL): a REPLACE that moves a row to that default is logged the same way, so the row's new key is unknown; have the application's sessions log FULL or NOBLOB images, and run sluice again",
					s.cfg.Database, s.cfg.Table, name)
			}
			switch skipped := s.keySkipped(e, i); {
			case skipped == len(s.cfg.Key):
				present[len(present)-1] = !s.inXA // the before image's key, unchanged
				continue
			case skipped > 0:
				// A partial after image (MINIMAL) holds the key columns the
				// update set: the new key is the before image's with them.
				row = s.withBeforeKey(e, row, e.Rows[i-1], i)
			}
		}
		k, err := s.cfg.Key.FromBinlog(row)
		if err != nil {
			return fmt.Errorf("binlog row of %s.%s: %w", s.cfg.Database, s.cfg.Table, err)
		}
		keys = append(keys, k)
		// An update's before image is the row's old key: gone unless its
		// after image (next, and later in order) names the same key. The
		// rows of an XA transaction are logged when it is prepared, before
		// it commits or rolls back, so whether they exist is not known.
		present = append(present, !s.inXA && !del && !(update && i%2 == 0))
	}
	s.cfg.Sink.Add(keys...)
	if p, ok := s.cfg.Sink.(PresenceSink); ok {
		p.Present(keys, present)
	}
	return nil
}

// keySkipped counts the key columns row image i of e lacks (the session's
// binlog_row_image left them out).
func (s *Streamer) keySkipped(e *replication.RowsEvent, i int) int {
	if i >= len(e.SkippedColumns) {
		return 0
	}
	n := 0
	for _, k := range s.cfg.Key {
		if slices.Contains(e.SkippedColumns[i], k.Ordinal-1) {
			n++
		}
	}
	return n
}

// defaultedKeySkipped names a key column with a DEFAULT that after image i
// of e lacks, on MariaDB, or "". MariaDB logs a REPLACE that finds its
// row by another unique key and moves it to the key column's default as an
// update whose MINIMAL after image leaves the key column out, like an update
// that keeps the key: the two cannot be told apart.
func (s *Streamer) defaultedKeySkipped(e *replication.RowsEvent, i int) string {
	if s.cfg.Flavor != dbconn.MariaDB || i >= len(e.SkippedColumns) {
		return ""
	}
	for _, k := range s.cfg.Key {
		if k.HasDefault && !k.AutoInc && slices.Contains(e.SkippedColumns[i], k.Ordinal-1) {
			return k.Name
		}
	}
	return ""
}

// withBeforeKey returns after image i of e with the key columns it lacks
// taken from before, the update's before image (which holds the whole key).
func (s *Streamer) withBeforeKey(e *replication.RowsEvent, after, before []any, i int) []any {
	row := slices.Clone(after)
	for _, k := range s.cfg.Key {
		if o := k.Ordinal - 1; slices.Contains(e.SkippedColumns[i], o) && o < len(row) && o < len(before) {
			row[o] = before[o]
		}
	}
	return row
}

// advance moves the position forward to p (a zero p: nowhere) and records
// the event's timestamp.
func (s *Streamer) advance(p Position, ts uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts > 0 {
		s.lastTS = time.Unix(int64(ts), 0)
	}
	if p.File == "" || p.Compare(s.pos) <= 0 {
		return
	}
	s.pos = p
	close(s.changed)
	s.changed = make(chan struct{})
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

// Position returns the end of the last transaction whose events have all
// been handed to the sink: reading again from there loses nothing.
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

// Close stops streaming and waits for the reader goroutine to end, which
// closes the connection.
func (s *Streamer) Close() {
	s.cancel()
	<-s.done
}
