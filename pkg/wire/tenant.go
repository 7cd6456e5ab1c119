package wire

import "strings"

// Tenants. A tenant is a submitter whose NATS user may publish contracts on
// harness.submit.<tenant> and read only what is under its own names: the
// answers on _INBOX.<tenant>.> and its runs' events on
// harness.tenant.<tenant>.events.<run>.<kind>. The server enforces it: the
// tenant is the subject token its permissions allow, never a claim in the
// message. A tenant's run ids start with t-<tenant>-, so any coordinator
// (one taking a run over included) knows whose run it is from the id alone.
const (
	SubmitTenantPrefix = SubjectSubmit + "."
	TenantPrefix       = "harness.tenant."
	InboxPrefix        = "_INBOX."
	tenantRunPrefix    = "t-"
)

// ValidTenant reports whether name is a tenant name: 1 to 32 lowercase
// letters and digits, so that it is one subject token and a run id's
// tenant can be read back unambiguously.
func ValidTenant(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// SubmitTenant returns the tenant a contract was submitted for: the last
// token of harness.submit.<tenant>, or "" for harness.submit itself.
func SubmitTenant(subject string) (string, bool) {
	t, ok := strings.CutPrefix(subject, SubmitTenantPrefix)
	if !ok || !ValidTenant(t) {
		return "", false
	}
	return t, true
}

// TenantRun names a tenant's run: t-<tenant>-<id>.
func TenantRun(tenant, id string) string { return tenantRunPrefix + tenant + "-" + id }

// TenantOf returns the tenant of a run id made by TenantRun, or "".
func TenantOf(run string) string {
	rest, ok := strings.CutPrefix(run, tenantRunPrefix)
	if !ok {
		return ""
	}
	t, _, ok := strings.Cut(rest, "-")
	if !ok || !ValidTenant(t) {
		return ""
	}
	return t
}

// TenantEvent returns the subject a tenant's run's event is copied to.
func TenantEvent(tenant, run, kind string) string {
	return TenantPrefix + tenant + ".events." + run + "." + kind
}

// TenantInbox returns the inbox prefix a tenant's answers go under.
func TenantInbox(tenant string) string { return InboxPrefix + tenant }

// ReplyAllowed reports whether a coordinator may send a submitter's answer
// to subject. For a tenant's contract: an inbox of that tenant, the only
// subjects it may read. For a contract on harness.submit, which only the
// operator and the coordinators may publish: any literal subject outside
// harness's own (harness.*) and the server's ($JS, $KV, $O, $SYS, $SRV
// and the rest of $). Anything else would let a submitter make a
// coordinator, which holds wide permissions, publish where the submitter
// may not: on a stream's subject, or a JetStream API call.
func ReplyAllowed(tenant, subject string) bool {
	if subject == "" || strings.ContainsAny(subject, " \t\r\n*>") || strings.Contains(subject, "..") ||
		strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") {
		return false
	}
	if tenant != "" {
		prefix := TenantInbox(tenant) + "."
		return strings.HasPrefix(subject, prefix) && len(subject) > len(prefix)
	}
	return !strings.HasPrefix(subject, "$") && !strings.HasPrefix(subject, "harness.") && subject != "harness"
}
