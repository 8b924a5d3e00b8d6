// Command chartcheck lints and renders a Helm chart with Helm's own
// packages, as `helm lint --strict` and `helm template` do, without the
// rest of the helm command (its cluster client, registries and plugins),
// which CI would otherwise build from source on every cold cache.
//
//	chartcheck lint     [-kube-version V] [-namespace NS] [-f values.yaml]... [-set k=v]... CHART
//	chartcheck template [-kube-version V] [-namespace NS] [-name RELEASE] [-f values.yaml]... [-set k=v]... CHART
//
// lint prints every finding and fails on a warning or an error. template
// prints the chart's manifests as one YAML stream (NOTES.txt and partials
// left out), each after a "# Source:" line as helm prints it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/strvals"
)

// list is a flag that may be given several times.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// options are the flags both commands take.
type options struct {
	kubeVersion string
	namespace   string
	name        string
	valueFiles  list
	sets        list
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "lint" && os.Args[1] != "template" {
		fmt.Fprintln(os.Stderr, "usage: chartcheck lint|template [flags] CHART")
		os.Exit(2)
	}
	command := os.Args[1]
	var o options
	fs := flag.NewFlagSet("chartcheck "+command, flag.ExitOnError)
	fs.StringVar(&o.kubeVersion, "kube-version", "1.37.2", "Kubernetes version the chart is rendered for")
	fs.StringVar(&o.namespace, "namespace", "default", "the release's namespace")
	fs.StringVar(&o.name, "name", "release-name", "the release's name (template)")
	fs.Var(&o.valueFiles, "f", "values file (repeatable; later ones win)")
	fs.Var(&o.sets, "set", "KEY=VALUE as helm --set takes it (repeatable; after the files)")
	_ = fs.Parse(os.Args[2:])
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck lint|template [flags] CHART")
		os.Exit(2)
	}
	var err error
	if command == "lint" {
		err = runLint(os.Stdout, fs.Arg(0), o)
	} else {
		err = runTemplate(os.Stdout, fs.Arg(0), o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartcheck %s: %v\n", command, err)
		os.Exit(1)
	}
}

// values merges the values files in order, then the --set values, as helm does.
func values(o options) (map[string]any, error) {
	merged := map[string]any{}
	for _, file := range o.valueFiles {
		vals, err := common.ReadValuesFile(file)
		if err != nil {
			return nil, err
		}
		merged = mergeMaps(merged, vals)
	}
	for _, set := range o.sets {
		if err := strvals.ParseInto(set, merged); err != nil {
			return nil, fmt.Errorf("--set %s: %w", set, err)
		}
	}
	return merged, nil
}

// mergeMaps merges b into a copy of a: b's values win, tables merge key by key.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]any); ok {
			if om, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(om, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// runLint runs Helm's chart linter and fails on a warning or an error.
func runLint(w io.Writer, chartDir string, o options) error {
	vals, err := values(o)
	if err != nil {
		return err
	}
	kubeVersion, err := common.ParseKubeVersion(o.kubeVersion)
	if err != nil {
		return err
	}
	linter := lint.RunAll(chartDir, vals, o.namespace, lint.WithKubeVersion(kubeVersion))
	failed := 0
	for _, msg := range linter.Messages {
		fmt.Fprintln(w, msg.Error())
		if msg.Severity >= support.WarningSev {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d warnings or errors", chartDir, failed)
	}
	fmt.Fprintf(w, "%s: linted, no warnings\n", chartDir)
	return nil
}

// runTemplate renders the chart as an installation of release o.name and
// writes its manifests.
func runTemplate(w io.Writer, chartDir string, o options) error {
	vals, err := values(o)
	if err != nil {
		return err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return err
	}
	kubeVersion, err := common.ParseKubeVersion(o.kubeVersion)
	if err != nil {
		return err
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	if c := ch.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, caps.KubeVersion.String()) {
		return fmt.Errorf("chart requires kubeVersion %s, not Kubernetes %s", c, caps.KubeVersion.Version)
	}
	release := common.ReleaseOptions{Name: o.name, Namespace: o.namespace, Revision: 1, IsInstall: true}
	top, err := util.ToRenderValues(ch, vals, release, caps)
	if err != nil {
		return err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return err
	}
	return writeManifests(w, files)
}

// writeManifests writes the rendered templates that are manifests, in name order.
func writeManifests(w io.Writer, files map[string]string) error {
	names := make([]string, 0, len(files))
	for name, content := range files {
		base := path.Base(name)
		if base == "NOTES.txt" || strings.HasPrefix(base, "_") || strings.TrimSpace(content) == "" {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return errors.New("the chart rendered no manifest")
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", name, files[name]); err != nil {
			return err
		}
	}
	return nil
}
