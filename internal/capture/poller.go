package capture

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// Poller reads a queue into a sink. It is safe for concurrent use.
//
// Each read is a round, numbered from 1; Round gives the number of the next
// one as a binlog.Position (an empty file name, the round as the offset), the
// clock a scheduler records with each mark. Forget(p), given the earliest
// position of a mark not yet applied, deletes the queue rows read in rounds
// before p: every key they hold was marked in such a round and has been
// applied since.
type Poller struct {
	q    *Queue
	sink binlog.Sink
	// batch is the most rows one query reads.
	batch int

	// round is the number of the read under way, or of the next one. It
	// is read without mu: the sink asks for it while a read holds mu.
	round atomic.Uint32

	mu sync.Mutex // protects the fields below
	// cursor is the highest sequence number read so far.
	cursor uint64
	// held maps each queue row read and not yet deleted to its round.
	held map[uint64]uint32
}

// keptRound marks a queue row Forget never deletes.
const keptRound = math.MaxUint32

// NewPoller returns a poller that hands q's keys to sink. A
// binlog.PresenceSink is told each key too, as not claimed present: the
// queue does not tell reliably whether a row exists after its change.
// MariaDB fires the AFTER UPDATE trigger of an UPDATE IGNORE that skipped
// its row on a duplicate, which records the old key as gone and the new one
// as present though neither row changed (an extra mark costs only a
// needless read; a false claim would fail the cut-over's comparison), and a
// row whose transaction commits late is read after later changes to its key.
func NewPoller(q *Queue, sink binlog.Sink) *Poller {
	p := &Poller{q: q, sink: sink, batch: 5000, held: map[uint64]uint32{}}
	p.round.Store(1)
	return p
}

// Round returns the number of the next read, as a position.
func (p *Poller) Round() binlog.Position { return binlog.Position{Pos: p.round.Load()} }

// Held returns how many queue rows were read and not yet deleted.
func (p *Poller) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Poll reads the rows numbered above the highest read so far, in order, and
// hands their keys to the sink. It returns how many it read. A row that
// commits later under a lower number is found by Drain.
func (p *Poller) Poll(ctx context.Context, db dbconn.Querier) (int, error) {
	total := 0
	for {
		p.mu.Lock()
		from := p.cursor
		p.mu.Unlock()
		n, err := p.read(ctx, db, " WHERE "+seq+" > "+strconv.FormatUint(from, 10)+" ORDER BY "+seq+" LIMIT "+strconv.Itoa(p.batch))
		total += n
		if err != nil || n < p.batch {
			return total, err
		}
	}
}

// Drain reads every row of the queue not read yet, whatever its number, and
// hands their keys to the sink. Called while no change can commit (under the
// cut-over's lock, on the locking connection if the lock covers the queue),
// it leaves no recorded change unread.
func (p *Poller) Drain(ctx context.Context, db dbconn.Querier) (int, error) {
	n, err := p.read(ctx, db, " ORDER BY "+seq)
	return n, err
}

// read runs one query of the queue with the tail given, hands the rows not
// held yet to the sink as one round, and returns how many rows it returned.
func (p *Poller) read(ctx context.Context, db dbconn.Querier, tail string) (int, error) {
	rows, err := db.QueryContext(ctx, "SELECT "+seq+", "+dbconn.QuoteIdent(LogColumn)+", "+p.q.key.SelectExprs()+" FROM "+p.q.quoted()+tail)
	if err != nil {
		return 0, fmt.Errorf("capture: read %s: %w", p.q.Table, err)
	}
	defer rows.Close()
	var (
		seqs     []uint64
		keys     []rowkey.Key
		unlogged []bool
		n        int
	)
	raw := make([][]byte, len(p.q.key))
	var num uint64
	var logged int
	dest := []any{&num, &logged}
	for i := range raw {
		dest = append(dest, &raw[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return n, fmt.Errorf("capture: read %s: %w", p.q.Table, err)
		}
		n++
		k, err := p.q.key.FromScan(raw)
		if err != nil {
			return n, fmt.Errorf("capture: read %s: %w", p.q.Table, err)
		}
		if logged == logStatement && p.q.StopStatements {
			return n, fmt.Errorf("capture: %w (%s)", ErrStatementFormat, p.q.orig.Name)
		}
		seqs, keys, unlogged = append(seqs, num), append(keys, k), append(unlogged, logged == logNone)
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("capture: read %s: %w", p.q.Table, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	round := p.round.Load()
	var fresh []rowkey.Key
	for i, s := range seqs {
		if _, ok := p.held[s]; ok {
			continue
		}
		p.held[s] = round
		if unlogged[i] {
			// Written with sql_log_bin=0: the row is not in the binlog,
			// and a logged delete of it would stop the replicas'
			// appliers (error 1032). It stays until the queue is dropped.
			p.held[s] = keptRound
		}
		p.cursor = max(p.cursor, s)
		fresh = append(fresh, keys[i])
	}
	if len(fresh) > 0 {
		// The sink is told while p.mu is held and before the round
		// moves on, so that Round, which the scheduler asks in Add, gives
		// this round's number, and no other read takes the same round.
		p.sink.Add(fresh...)
		if ps, ok := p.sink.(binlog.PresenceSink); ok {
			// No key is claimed present: see NewPoller.
			ps.Present(fresh, make([]bool, len(fresh)))
		}
		p.round.Add(1)
	}
	return n, nil
}

// Forget deletes the queue rows read in rounds before since (the earliest
// position of a mark not yet applied; with nothing held, the current Round).
// It returns how many it deleted.
func (p *Poller) Forget(ctx context.Context, db *sql.DB, since binlog.Position) (int, error) {
	p.mu.Lock()
	var done []uint64
	for s, r := range p.held {
		if r < since.Pos {
			done = append(done, s)
		}
	}
	p.mu.Unlock()
	for i := 0; i < len(done); i += 1000 {
		part := done[i:min(i+1000, len(done))]
		list := make([]string, len(part))
		for j, s := range part {
			list[j] = strconv.FormatUint(s, 10)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM "+p.q.quoted()+" WHERE "+seq+" IN ("+strings.Join(list, ",")+")"); err != nil {
			return i, fmt.Errorf("capture: trim %s: %w", p.q.Table, err)
		}
		p.mu.Lock()
		for _, s := range part {
			delete(p.held, s)
		}
		p.mu.Unlock()
	}
	return len(done), nil
}
