package ledger

// The budget arithmetic, without I/O. Memory runs it directly; the Redis
// scripts in scripts.go run the same rules in Lua, in the same order, and
// the conformance suite holds the two to the same answers.

// dims lists the limited dimensions in the order they are checked.
var dims = [5]Dimension{DimInputTokens, DimOutputTokens, DimTokens, DimCost, DimSteps}

// vec is a Limits or a Usage as five numbers in dims order (tokens is input
// plus output for a Usage).
type vec [5]int64

func limitVec(l Limits) vec {
	return vec{l.InputTokens, l.OutputTokens, l.Tokens, l.CostMicros, l.Steps}
}

func usageVec(u Usage) vec {
	return vec{u.InputTokens, u.OutputTokens, u.InputTokens + u.OutputTokens, u.CostMicros, u.Steps}
}

// over returns the refusal if drawing est on top of used (spent plus
// reserved) would break a cap of c, or if a capped dimension is already
// used up: a call never starts once a ceiling is reached, even one that
// asks nothing in that dimension. A zero cap is no cap.
func over(scope Scope, c Limits, used, est Usage) *Refusal {
	cv, uv, ev := limitVec(c), usageVec(used), usageVec(est)
	for i, d := range dims {
		if cv[i] > 0 && (uv[i]+ev[i] > cv[i] || uv[i] >= cv[i]) {
			return &Refusal{Scope: scope, Dimension: d, Asked: ev[i], Remaining: max(0, cv[i]-uv[i]), Limit: cv[i]}
		}
	}
	return nil
}

// remaining returns c minus spent and reserved, never below zero, with
// Unlimited where c has no cap.
func remaining(c Limits, spent, reserved Usage) Limits {
	cv, uv := limitVec(c), usageVec(spent.Add(reserved))
	var r vec
	for i := range cv {
		if cv[i] <= 0 {
			r[i] = Unlimited
		} else {
			r[i] = max(0, cv[i]-uv[i])
		}
	}
	return Limits{InputTokens: r[0], OutputTokens: r[1], Tokens: r[2], CostMicros: r[3], Steps: r[4]}
}
