package trace

// RewindForTest sets the sequence the writer expects, as if the
// acknowledgement of its last append had been lost.
func (w *Writer) RewindForTest(seq uint64) { w.last = seq }
