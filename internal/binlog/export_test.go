package binlog

// ConnectionID returns the server's id of the streamer's binlog connection,
// 0 while it has none.
func ConnectionID(s *Streamer) uint32 { return s.connID.Load() }
