// promql-check parses PromQL expressions with Prometheus's own parser (promql/parser), so the chart's
// dashboard and alerting rules are checked by the same code Prometheus uses to load them.
//
// Input on stdin: a JSON array of {"name": "...", "expr": "..."}. Output on stdout: a JSON array of
// {"name", "error", "metrics"} — error empty when the expression parses, metrics the metric names its
// vector selectors name (so the caller can check them against what the service exports).
// Exit status 0 when every expression parses, 1 otherwise, 2 on bad input.
//
// promql-check --rules: stdin is a PrometheusRule's spec ({"groups": [...]}, the rule-file format), checked
// by Prometheus's own rule-file loader (model/rulefmt, strict: unknown fields are errors) as Prometheus
// loads the file the Operator generates: unique group names, alert or record, a parsing expression, valid
// label names, annotation and label templates that parse. Output: a JSON array of the errors (empty when
// valid); exit status 0 when valid, 1 otherwise, 2 on bad input.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

type query struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

type result struct {
	Name    string   `json:"name"`
	Error   string   `json:"error"`
	Metrics []string `json:"metrics"`
}

func metricNames(expr parser.Expr) []string {
	seen := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		selector, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selector.Name
		if name == "" {
			for _, m := range selector.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name != "" {
			seen[name] = true
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// checkRules validates a rule file (JSON is YAML) with Prometheus's loader.
func checkRules() {
	content, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: bad input: %v\n", err)
		os.Exit(2)
	}
	_, errs := rulefmt.Parse(content, false)
	messages := make([]string, 0, len(errs))
	for _, e := range errs {
		messages = append(messages, e.Error())
	}
	if err := json.NewEncoder(os.Stdout).Encode(messages); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: %v\n", err)
		os.Exit(2)
	}
	if len(messages) > 0 {
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--rules" {
		checkRules()
		return
	}
	var queries []query
	if err := json.NewDecoder(os.Stdin).Decode(&queries); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: bad input: %v\n", err)
		os.Exit(2)
	}
	results := make([]result, 0, len(queries))
	failed := false
	for _, q := range queries {
		r := result{Name: q.Name, Metrics: []string{}}
		expr, err := parser.ParseExpr(q.Expr)
		if err != nil {
			r.Error = err.Error()
			failed = true
		} else {
			r.Metrics = metricNames(expr)
		}
		results = append(results, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: %v\n", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}
