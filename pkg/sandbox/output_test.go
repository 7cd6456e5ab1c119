package sandbox

import (
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"fits", 1000, []string{"hello ", "world"}, "hello world"},
		{"exactly the budget", 200, []string{strings.Repeat("a", 136)}, strings.Repeat("a", 136)},
		{"one byte over", 200, []string{strings.Repeat("a", 68), "b", strings.Repeat("c", 68)}, strings.Repeat("a", 68) + elisionLine(1) + strings.Repeat("c", 68)},
		{"many small writes", 200, strings.Split(strings.Repeat("x", 68)+strings.Repeat("y", 500)+strings.Repeat("z", 68), ""),
			strings.Repeat("x", 68) + elisionLine(500) + strings.Repeat("z", 68)},
		{"one big write", 200, []string{strings.Repeat("x", 68) + strings.Repeat("y", 500) + strings.Repeat("z", 68)},
			strings.Repeat("x", 68) + elisionLine(500) + strings.Repeat("z", 68)},
		{"cut inside characters", 200, []string{strings.Repeat("a", 67) + "é" + strings.Repeat("y", 10) + "é" + strings.Repeat("z", 67)},
			strings.Repeat("a", 67) + elisionLine(14) + strings.Repeat("z", 67)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCapture(tt.limit)
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			got := c.String()
			if got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if len(got) > tt.limit {
				t.Errorf("len(String()) = %d, want <= %d", len(got), tt.limit)
			}
		})
	}
}

func TestElidedBytes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"none", "plain output", 0},
		{"one", "head" + elisionLine(12345) + "tail", 12345},
		{"two", "a" + elisionLine(2) + "b" + elisionLine(3), 5},
		{"not a number", "…[elided many bytes]…", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ElidedBytes(tt.in); got != tt.want {
				t.Errorf("ElidedBytes(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}
