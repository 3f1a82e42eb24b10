package redistally

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Row is one command of a sender, with what its scripts ran.
type Row struct {
	Sender, What string
	Calls        int64            // sent by the client
	Inner        int64            // run by the script (Redis counts each)
	InnerBy      map[string]int64 // Inner by command
}

// Total is the row's commands as Redis counts them.
func (r Row) Total() int64 { return r.Calls + r.Inner }

// Rows groups c by sender and command, the senders with the most
// commands first and, within one, its commands by total.
func (c Counts) Rows() []Row {
	byKey := map[[2]string]*Row{}
	senders := map[string]int64{}
	for k, v := range c {
		r := byKey[[2]string{k.Sender, k.What}]
		if r == nil {
			r = &Row{Sender: k.Sender, What: k.What, InnerBy: map[string]int64{}}
			byKey[[2]string{k.Sender, k.What}] = r
		}
		if k.Inner == "" {
			r.Calls += v
		} else {
			r.Inner += v
			r.InnerBy[k.Inner] += v
		}
		senders[k.Sender] += v
	}
	var rows []Row
	for _, r := range byKey {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(senders[b.Sender], senders[a.Sender]), cmp.Compare(a.Sender, b.Sender),
			cmp.Compare(b.Total(), a.Total()), cmp.Compare(a.What, b.What))
	})
	return rows
}

// Write prints c per task (divided by tasks) as a table: one line per
// sender and command (commands under 0.05 a task folded into one line
// per sender), its calls, its scripts' inner commands and the sender's
// subtotal. prefix starts every line.
func (c Counts) Write(w io.Writer, prefix string, tasks int) {
	per := func(n int64) float64 { return float64(n) / float64(tasks) }
	fmt.Fprintf(w, "%s%-22s %-64s %7s %7s %7s  %s\n", prefix, "sender", "command", "sent", "inner", "total", "inner commands")
	rows := c.Rows()
	for i := 0; i < len(rows); {
		sender := rows[i].Sender
		var sum, rest Row
		restN := 0
		for ; i < len(rows) && rows[i].Sender == sender; i++ {
			r := rows[i]
			sum.Calls, sum.Inner = sum.Calls+r.Calls, sum.Inner+r.Inner
			if per(r.Total()) < 0.05 {
				rest.Calls, rest.Inner = rest.Calls+r.Calls, rest.Inner+r.Inner
				restN++
				continue
			}
			fmt.Fprintf(w, "%s%-22s %-64s %7.2f %7.2f %7.2f  %s\n", prefix, sender, clip(r.What, 64), per(r.Calls), per(r.Inner), per(r.Total()), innerText(r.InnerBy, tasks))
		}
		if restN > 0 {
			fmt.Fprintf(w, "%s%-22s %-64s %7.2f %7.2f %7.2f\n", prefix, sender, fmt.Sprintf("(%d other commands under 0.05 a task)", restN), per(rest.Calls), per(rest.Inner), per(rest.Total()))
		}
		fmt.Fprintf(w, "%s%-22s %-64s %7.2f %7.2f %7.2f\n", prefix, sender, "= sender's total", per(sum.Calls), per(sum.Inner), per(sum.Total()))
	}
	fmt.Fprintf(w, "%s%-22s %-64s %7s %7s %7.2f\n", prefix, "all", "", "", "", per(c.Total()))
}

func innerText(by map[string]int64, tasks int) string {
	type kv struct {
		k string
		v int64
	}
	var s []kv
	for k, v := range by {
		s = append(s, kv{k, v})
	}
	slices.SortFunc(s, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	var parts []string
	for _, e := range s {
		parts = append(parts, fmt.Sprintf("%s %.2f", e.k, float64(e.v)/float64(tasks)))
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
