package provider

import (
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		vars    map[string]string
		want    string // the provider's name
		primary string
		err     string
	}{
		{"nothing set", nil, "", "", "no provider"},
		{"openai", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}, "openai", "openai", ""},
		{"a chain in the default order", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "m", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_MODEL": "c"},
			"openai -> anthropic", "openai", ""},
		{"a chain in the order asked", map[string]string{"HARNESS_PROVIDERS": "anthropic,openai", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m",
			"ANTHROPIC_API_KEY": "k", "ANTHROPIC_MODEL": "c"}, "anthropic -> openai", "anthropic", ""},
		{"an unknown vendor", map[string]string{"HARNESS_PROVIDERS": "openai,gemini", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}, "", "", "gemini"},
	}
	for _, tt := range tests {
		p, primary, err := FromEnv(env(tt.vars))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: FromEnv error = %v, want one mentioning %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name() != tt.want || primary != tt.primary {
			t.Errorf("%s: FromEnv = %v, %q, %v; want %q with primary %q", tt.name, p, primary, err, tt.want, tt.primary)
		}
	}
}
