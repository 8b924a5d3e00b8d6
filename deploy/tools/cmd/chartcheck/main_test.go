package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeChart writes a chart whose values file is values and whose
// templates are the given files, and returns its directory.
func writeChart(t *testing.T, values string, templates map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 0.1.0\nicon: https://example.com/icon.png\nkubeVersion: \">=1.29.0-0\"\n",
		"values.yaml": values,
	}
	for name, text := range templates {
		files[filepath.Join("templates", name)] = text
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  colour: {{ .Values.colour | quote }}\n  size: {{ .Values.size | quote }}\n"

// template prints the manifests a release would install, with the values
// of later files and then --set winning, and leaves out the notes and the
// partials that are not manifests.
func TestTemplateRendersTheManifestsWithTheGivenValues(t *testing.T) {
	dir := writeChart(t, "colour: red\nsize: small\n", map[string]string{
		"configmap.yaml": configMap,
		"NOTES.txt":      "installed {{ .Release.Name }}",
		"_helpers.tpl":   `{{ define "demo.x" }}x{{ end }}`,
	})
	override := filepath.Join(t.TempDir(), "override.yaml")
	if err := os.WriteFile(override, []byte("colour: blue\nsize: large\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := options{kubeVersion: "1.37.2", namespace: "ns", name: "shop", valueFiles: list{override}, sets: list{"size=medium"}}
	if err := runTemplate(&out, dir, o); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"# Source: demo/templates/configmap.yaml", "name: shop", `colour: "blue"`, `size: "medium"`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "installed") || strings.Contains(got, "_helpers") {
		t.Errorf("output holds the notes or a partial:\n%s", got)
	}
}

// template refuses a Kubernetes version outside the chart's kubeVersion,
// as helm template does.
func TestTemplateRefusesAnIncompatibleKubernetesVersion(t *testing.T) {
	dir := writeChart(t, "colour: red\nsize: small\n", map[string]string{"configmap.yaml": configMap})
	err := runTemplate(&bytes.Buffer{}, dir, options{kubeVersion: "1.28.0", namespace: "ns", name: "shop"})
	if err == nil || !strings.Contains(err.Error(), "requires kubeVersion") {
		t.Fatalf("runTemplate = %v, want the kubeVersion refused", err)
	}
}

// lint fails on what helm lint --strict fails on: here a template that
// does not parse, reported with its file.
func TestLintFailsOnAWarningOrAnError(t *testing.T) {
	good := writeChart(t, "colour: red\nsize: small\n", map[string]string{"configmap.yaml": configMap})
	if err := runLint(&bytes.Buffer{}, good, options{kubeVersion: "1.37.2", namespace: "ns"}); err != nil {
		t.Fatalf("a clean chart: %v", err)
	}
	bad := writeChart(t, "colour: red\n", map[string]string{"configmap.yaml": "kind: ConfigMap\n{{ .Values.colour "})
	var out bytes.Buffer
	if err := runLint(&out, bad, options{kubeVersion: "1.37.2", namespace: "ns"}); err == nil {
		t.Fatalf("a broken template linted clean:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "configmap.yaml") {
		t.Errorf("the finding does not name the file:\n%s", out.String())
	}
}
