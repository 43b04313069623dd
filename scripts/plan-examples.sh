#!/usr/bin/env bash
# Prints docs/PLANS.md: sluice plan's output for a dozen ALTERs of the
# benchmark's 1,000,000-row sysbench table on the sandbox, copied afresh from
# the bench's template (make bench or make bench-ddl creates it once) into a
# scratch database that is dropped afterwards.
# Usage: scripts/plan-examples.sh > docs/PLANS.md
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/sandbox.sh env)"
hostport=${SLUICE_TEST_DSN#*tcp(}; hostport=${hostport%%)*}
conn=(--host "${hostport%:*}" --port "${hostport#*:}" --user root --database sluice_plans --table sbtest1)
mysql() { scripts/sandbox.sh mysql "$@"; }
if [ "$(mysql -N -e "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest_tpl' AND TABLE_NAME = 'sbtest1'")" != 1 ]; then
	echo "plan-examples: the bench's template table sbtest_tpl.sbtest1 is missing: run make bench-ddl (or make bench) once first" >&2
	exit 1
fi
mysql -e "DROP DATABASE IF EXISTS sluice_plans; CREATE DATABASE sluice_plans;
	CREATE TABLE sluice_plans.sbtest1 LIKE sbtest_tpl.sbtest1;
	INSERT INTO sluice_plans.sbtest1 SELECT * FROM sbtest_tpl.sbtest1;
	ANALYZE TABLE sluice_plans.sbtest1" >/dev/null
trap 'mysql -e "DROP DATABASE IF EXISTS sluice_plans"' EXIT

echo "# sluice plan: examples"
echo
echo "Output of \`sluice plan\` for the benchmark's 1,000,000-row sysbench table"
echo "(\`id INT PRIMARY KEY, k INT NOT NULL DEFAULT 0, c CHAR(120), pad CHAR(60), KEY k_1 (k)\`)"
echo "on the 2-core MySQL 9.7 sandbox. Regenerate with \`scripts/plan-examples.sh > docs/PLANS.md\`."
while IFS='|' read -r alter extra; do
	echo
	echo "## \`$alter\`${extra:+ with \`$extra\`}"
	echo
	echo '```'
	# shellcheck disable=SC2086
	bin/sluice plan "${conn[@]}" --alter "$alter" $extra 2>&1
	echo '```'
done <<'LIST'
ADD COLUMN note VARCHAR(64)
DROP COLUMN pad
RENAME COLUMN c TO body
ALTER COLUMN k SET DEFAULT 5
ADD INDEX c_k (c, k)
ADD INDEX c_k (c, k)|--replicas --max-inplace-seconds 1s
ADD INDEX idx_c (c), ADD INDEX idx_pad (pad), DROP INDEX k_1
ADD UNIQUE KEY u_k (k)
MODIFY k BIGINT NOT NULL DEFAULT 0
MODIFY c CHAR(60) NOT NULL DEFAULT ''
MODIFY k INT NULL
ENGINE=InnoDB
ADD COLUMN id2 BIGINT AS (id * 2) STORED
ADD COLUMN note VARCHAR(64), ADD INDEX note_k (note, k)
LIST
