package sandboxer

// OpenHandles returns the number of tools.Workspaces s holds open for its
// runs: one for all the runs on one directory.
func OpenHandles(s *Sandboxer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := make(map[*workspace]bool)
	for _, w := range s.workspaces {
		open[w] = true
	}
	return len(open)
}
