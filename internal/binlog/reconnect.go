package binlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Reconnects.
//
// go-mysql's own retry (off here: DisableRetrySync) restarts a broken
// stream from the end of the last event it received from the server, which
// may lie inside a transaction and ahead of what sluice has handled; it
// relies on its parser still holding the table map events read before the
// break. It does not retry when the server ends the stream with an error
// packet, it counts attempts (one second apart) rather than time, and each
// attempt KILLs the previous connection's id on the new connection, which
// after a server restart may be another session's.
//
// The streamer instead drops the broken connection and opens a new one at
// its own Position: the end of the last transaction whose events all
// reached the sink. Events after it that the sink already had are handed
// over again, which is harmless (the apply reads each key's row from the
// table); none is skipped. The new connection starts with the server's fake
// rotate event and the file's format description event, which set the file
// name and the checksum flag; the parser is new, and every row event after
// the position has its table map event after it too.

// lostError is a read error that means the connection broke.
type lostError struct{ err error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// link is one binlog connection: its syncer and the sockets it dialed.
type link struct {
	syncer *replication.BinlogSyncer
	mu     sync.Mutex
	conns  []net.Conn
	// abort ends a dial while the connection is being set up: the
	// streamer is closing.
	abort context.Context
}

func (l *link) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	abort := l.abort
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(abort, cancel)()
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.abort.Err() != nil { // the streamer closed while dialing
		c.Close()
		return nil, l.abort.Err()
	}
	l.conns = append(l.conns, c)
	return c, nil
}

// drop closes the sockets of a link whose stream has ended or is being
// abandoned. Unlike BinlogSyncer.Close it sends no KILL: after a server
// restart the old connection's id may be another session's. (A dump
// thread whose socket is closed ends when a write to it fails.)
func (l *link) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// connect opens a connection that streams from pos and makes it the
// streamer's link. ctx ending while it connects aborts it.
func (s *Streamer) connect(ctx context.Context, pos Position) (*replication.BinlogStreamer, error) {
	l := &link{abort: ctx}
	cfg := s.scfg
	cfg.Dialer = l.dial
	l.syncer = replication.NewBinlogSyncer(cfg)
	stop := context.AfterFunc(ctx, l.drop)
	stream, err := l.syncer.StartSync(mysql.Position{Name: pos.File, Pos: pos.Pos})
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		l.drop()
		return nil, err
	}
	l.mu.Lock()
	l.abort = context.Background() // BinlogSyncer.Close dials to KILL the connection
	l.mu.Unlock()
	s.link = l
	s.connID.Store(l.syncer.LastConnectionID())
	return stream, nil
}

// reconnect opens a new connection at the streamer's position after the
// connection broke with cause, with a backoff between attempts, until
// Config.ReconnectFor has passed since the loss. An attempt that fails with
// an error other than a lost connection ends it.
func (s *Streamer) reconnect(ctx context.Context, cause error) (*replication.BinlogStreamer, error) {
	limit := s.cfg.ReconnectFor
	if limit == 0 {
		limit = DefaultReconnectFor
	}
	if limit < 0 {
		return nil, fmt.Errorf("binlog connection lost (reconnects are off): %w", cause)
	}
	if s.lostAt.IsZero() {
		s.lostAt = time.Now()
	}
	first := cause
	for {
		pos := s.Position()
		s.attempts++
		left := limit - time.Since(s.lostAt)
		if left <= 0 {
			if errors.Is(cause, first) {
				return nil, fmt.Errorf("binlog connection lost and not re-established within %s (resuming at %s): %w", limit, pos, cause)
			}
			return nil, fmt.Errorf("binlog connection lost (%v) and not re-established within %s (resuming at %s): last attempt: %w", first, limit, pos, cause)
		}
		wait := min(dbconn.Backoff(s.attempts), left)
		s.log.Warn("binlog connection lost; reconnecting", "error", cause.Error(), "position", pos.String(),
			"attempt", s.attempts, "lost_for", time.Since(s.lostAt).Round(time.Millisecond).String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		stream, err := s.connect(ctx, pos)
		switch {
		case err == nil:
			return stream, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !dbconn.ConnectionLost(err):
			return nil, fmt.Errorf("reconnect to the binlog at %s after the connection was lost (%v): %w", pos, first, err)
		}
		cause = err
	}
}
