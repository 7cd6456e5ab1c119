// Package procguard hardens a harness process against the commands it
// runs (Protect) and names the environment variables that carry secrets
// (Secret).
package procguard

import "strings"

// secretSuffixes end the names of variables that hold secrets.
var secretSuffixes = []string{"_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASS", "_CREDENTIALS"}

// secretNames are variables that may carry a secret in a URL.
var secretNames = map[string]bool{"REDIS_URL": true, "NATS_URL": true, "DATABASE_URL": true}

// Secret reports whether an environment variable of this name holds a
// secret: a provider API key (OPENAI_API_KEY, ANTHROPIC_API_KEY...), a
// token, a password, or a URL that may embed credentials.
func Secret(name string) bool {
	n := strings.ToUpper(name)
	if secretNames[n] {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}
