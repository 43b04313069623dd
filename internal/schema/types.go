package schema

// Type families, by the server's DATA_TYPE (lower case). Read only.
var (
	IntegerTypes  = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true}
	TextTypes     = map[string]bool{"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true}
	BinaryTypes   = map[string]bool{"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true}
	TemporalTypes = map[string]bool{"date": true, "datetime": true, "timestamp": true, "time": true}
	MemberTypes   = map[string]bool{"enum": true, "set": true}
)
