package main

import (
	"fmt"
	"strings"
)

// table is the figures as Markdown: one line per workload and metric, one
// column per target, then the mount against GlusterFS and against the raw
// directory (above 1 is better for rates, below 1 for latencies and space).
func (b *bench) table() string {
	var sb strings.Builder
	sb.WriteString("\n| workload | figure | mount | GlusterFS r3 | raw | mount / GlusterFS | mount / raw |\n")
	sb.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	type key struct{ workload, metric string }
	var order []key
	vals := map[key]map[string]float64{}
	for _, r := range b.rows {
		k := key{r.workload, r.metric}
		if vals[k] == nil {
			vals[k] = map[string]float64{}
			order = append(order, k)
		}
		vals[k][r.target] = r.value
	}
	cell := func(m map[string]float64, t string) string {
		if v, ok := m[t]; ok {
			return fmt.Sprintf("%.2f", v)
		}
		return ""
	}
	ratio := func(m map[string]float64, a, c string) string {
		x, ok1 := m[a]
		y, ok2 := m[c]
		if !ok1 || !ok2 || y == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f×", x/y)
	}
	for _, k := range order {
		m := vals[k]
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", k.workload, k.metric,
			cell(m, "mount"), cell(m, "gluster"), cell(m, "raw"), ratio(m, "mount", "gluster"), ratio(m, "mount", "raw"))
	}
	return sb.String()
}
