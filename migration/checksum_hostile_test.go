package migration_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestChecksumCatchesDamageInConvertedColumns: ALTERs that widen a column
// without changing a byte (BLOB -> MEDIUMBLOB, VARBINARY(8) ->
// VARBINARY(16)) or convert it exactly (FLOAT -> DOUBLE, BIT(8) -> BIT(16)),
// once as they are (the run succeeds, comparing the column), once with the
// shadow damaged behind sluice's back as the checksum starts (the run stops,
// the original keeps its value). A change with no exact SQL form (DOUBLE ->
// FLOAT, rounded) leaves the column's value out of the checksum, but not
// whether it is NULL: a value lost to NULL still stops the run.
func TestChecksumCatchesDamageInConvertedColumns(t *testing.T) {
	for _, tc := range []struct{ col, alter, damage, skipped string }{
		{"bl", "MODIFY bl MEDIUMBLOB NOT NULL", "''", ""},
		{"vb", "MODIFY vb VARBINARY(16) NOT NULL", "''", ""},
		{"f", "MODIFY f DOUBLE NOT NULL", "0", ""},
		{"bt", "MODIFY bt BIT(16) NOT NULL", "0", ""},
		{"d", "MODIFY d FLOAT NULL", "NULL", "d"},
	} {
		t.Run(tc.col, func(t *testing.T) {
			for _, damaged := range []bool{false, true} {
				db := testdb.New(t)
				db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, bl BLOB NOT NULL, vb VARBINARY(8) NOT NULL, f FLOAT NOT NULL, bt BIT(8) NOT NULL, d DOUBLE NULL)")
				db.Fill(t, "t", 1000, `n, REPEAT('payload', 10), CONCAT('v', n), n / 7, n % 256, n / 3`)
				before := db.Dump(t, "t", "id, HEX("+tc.col+")", "id")
				cfg := config(t, db, "t", tc.alter)
				cfg.DropOld = true
				hit := false
				if damaged {
					cfg.OnPhase = func(name string) {
						if name == "checksum" {
							db.MustExec(t, "UPDATE _t_new SET "+tc.col+" = "+tc.damage+" WHERE id = 17")
							hit = true
						}
					}
				}
				res, err := mustRunner(t, cfg).Run(context.Background())
				switch {
				case !damaged && err != nil:
					t.Fatalf("%s as copied: %v", tc.alter, err)
				case !damaged && fmt.Sprint(res.ChecksumSkipped) != fmt.Sprint(slices.DeleteFunc([]string{tc.skipped}, func(s string) bool { return s == "" })):
					t.Errorf("%s: the checksum skipped %v, want [%s]", tc.alter, res.ChecksumSkipped, tc.skipped)
				case damaged && !hit:
					t.Fatal("the checksum phase never started")
				case damaged && err == nil:
					t.Errorf("%s: the run succeeded with the shadow damaged (row 17's %s set to %s; checksum skipped %v)", tc.alter, tc.col, tc.damage, res.ChecksumSkipped)
				}
				if after := db.Dump(t, "t", "id, HEX("+tc.col+")", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s (damaged %v): the table's %s values changed", tc.alter, damaged, tc.col)
				}
			}
		})
	}
}
