// Package policy decides what an agent may read, write, execute and
// connect to. It is the pure core of the permission boundary: it evaluates,
// and never performs, logs or waits. The coordinator checks every act
// before dispatching it, and the sandboxer refuses what arrives without a
// verdict covering it.
//
// The semantics are those of io-harness 0.17 (src/policy.rs). A [Policy]
// is a stack of named [Layer]s of [Rule]s, plus a default [Effect] per
// [Act]. Effects are ordered [Allow] < [Ask] < [Deny]. A check runs three
// passes, Deny, then Ask, then Allow; each pass walks the layers in
// stacking order and their rules in order, and the first rule of the act
// with that pass's effect whose pattern matches the target decides. If no
// rule matches, the act's default decides. Specificity does not matter: a
// broad deny beats a narrow allow, an ask beats an allow, and a layer
// stacked later can add allows but never re-allow a deny. Every [Verdict]
// names the pattern and layer that decided it, or says the default did.
//
// Patterns are globs (package internal/glob): '*' matches any run of
// characters including '/', '?' exactly one character, everything else
// itself. What a pattern is matched against depends on the act:
//
//   - read, write: the path relative to the workspace root, cleaned
//     lexically, tried whole and by its last element, so ".env" covers
//     "config/.env". Absolute paths and paths climbing out with ".." are
//     refused before any rule is tried.
//   - exec: the program, and the whole argv joined with spaces; the
//     stricter verdict wins, so an allow must cover both ("npm*" covers
//     "npm" and "npm test"; "npm *" does not cover the program "npm", which
//     then falls to the default). A program given by path is also checked by
//     its last element, so "/usr/bin/npm publish" meets the rules written
//     for "npm publish".
//   - net: host:port and, when the port is all digits, the bare host, so
//     "api.example.com" covers every port and "api.example.com:443" only
//     that one. Hosts compare without ASCII case and without a trailing dot,
//     and an IP address in any spelling compares as its canonical form:
//     "[::1]", "::1" and "0:0::1" are one address, bracketed in the whole
//     form only when a port follows ("[::1]:8080", whose bare host is
//     "::1"), so a rule naming "[::1]" or "::1" covers every port of it. An
//     IPv4-mapped IPv6 address ("::ffff:127.0.0.1") is the IPv4 address it
//     reaches. Literal net patterns are normalised the same way.
//
// Patterns match with case, except those of the built-in layers (below).
//
// Two built-in layers come first in every policy compiled from a contract
// ([FromProtocol], [Default]), and no later layer can re-allow what they
// deny: builtin-secrets denies reading and writing the secret-bearing files
// of [SecretPatterns] (.env and .env.*, private keys and certificate
// bundles, SSH keys, credential stores, .git/config), and builtin-git
// denies writing .git and everything under it, at any depth
// ([GitPatterns]). Their patterns match without regard to ASCII case
// (".ENV", "ID_RSA", "Server.PEM", ".GIT/hooks/x"), which is sound because
// they only deny; a rule a user writes matches with case.
//
// Beyond io-harness, targets are normalised where that is sound (cleaned
// paths, program basenames, host case, IP address forms), and a zero Effect
// or a nil *Policy fails closed. Unlike io-harness, the last-element rule applies to paths
// only: io-harness also tries it on exec and net targets, where the "last
// element" of "go test ./pkg/x" is "x".
//
// Composition has two forms. [Merge] stacks peers: layers concatenate, and
// each default becomes the stricter of the two. [Contain] derives a child's
// policy from its parent's: the child's allow rules are dropped and the
// defaults tighten, so no descendant, at any depth, holds an allow its root
// lacked. [Policy.Remember] adds an approver's remembered rules as a top
// layer, which can add allows but not override a deny. [Policy.OneFile]
// confines a policy to one file at the workspace root, for a single-file
// contract: its read and write allows give way to a top layer
// ([FileLayer]) allowing that file alone.
//
// A caller:
//
//  1. Compiles the contract's policy once with [FromProtocol] (nil gives
//     [Default]; the built-in layers are always first), and stores
//     [Policy.Protocol] with the run; [Restore] reads it back.
//  2. Checks each act before performing it: [Policy.CheckPath] for a file,
//     [Policy.CheckExec] for a command, [Policy.CheckNet] for a host, or
//     [Policy.Check] for a stored (act, target) pair.
//  3. On Allow proceeds; on Ask asks the approver and, on approval,
//     checks the (possibly rewritten) action again, letting only a Deny
//     stop it; on Deny, or an Ask it cannot put to anyone, shows the model
//     [Verdict.Refusal].
//
// What argv patterns cannot express: a pattern sees a command line, not
// its meaning. deny "npm publish*" does not catch "npm --loglevel x
// publish" (an option before the subcommand), "env npm publish" or "nice
// npm publish" (a wrapper program), "sh -c 'npm publish'" (a shell), or
// argv holding an empty or space-containing argument. Deny the wrapper and
// the shells themselves, and prefer an allow list of exact commands over a
// deny list of dangerous ones; docs/security.md has the advice in full.
package policy
