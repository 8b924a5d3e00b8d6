// Command k8sschema writes one JSON schema per Kubernetes kind from the
// OpenAPI (swagger 2.0) document of the Kubernetes API, in the layout
// kubeconform reads with -schema-location DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json:
// deployment-apps-v1.json, service-v1.json, and so on.
//
// Each file stands alone: the kind's schema with the definitions it
// reaches under "definitions". The transformation is openapi2jsonschema's
// strict one: every object schema that lists properties allows no others
// (the kind's top level too), an int-or-string accepts a string or an
// integer and a quantity a string or a number. Descriptions are left out.
//
//	k8sschema -swagger swagger.json -out DIR
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	refPrefix  = "#/definitions/"
	quantityID = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

func main() {
	swagger := flag.String("swagger", "", "the Kubernetes API's swagger.json")
	out := flag.String("out", "", "directory to write the schemas to")
	flag.Parse()
	if *swagger == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -swagger FILE -out DIR")
		os.Exit(2)
	}
	n, err := run(*swagger, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: %d schemas in %s\n", n, *out)
}

// groupVersionKind is one entry of a definition's x-kubernetes-group-version-kind.
type groupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// run writes a schema for every kind the document defines and returns how many.
func run(swaggerPath, outDir string) (int, error) {
	raw, err := os.ReadFile(swaggerPath)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", swaggerPath, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions", swaggerPath)
	}
	defs := make(map[string]any, len(doc.Definitions))
	for name, def := range doc.Definitions {
		defs[name] = strict(def)
	}
	defs[quantityID] = map[string]any{"oneOf": []any{
		map[string]any{"type": "string"}, map[string]any{"type": "number"},
	}}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return 0, err
	}
	written := 0
	for name, def := range doc.Definitions {
		for _, gvk := range kindsOf(def) {
			if err := writeSchema(outDir, gvk, name, defs); err != nil {
				return written, err
			}
			written++
		}
	}
	if written == 0 {
		return 0, errors.New("no definition names a kind (x-kubernetes-group-version-kind)")
	}
	return written, nil
}

// kindsOf returns the kinds a definition is the schema of.
func kindsOf(def any) []groupVersionKind {
	m, _ := def.(map[string]any)
	list, ok := m["x-kubernetes-group-version-kind"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil
	}
	var gvks []groupVersionKind
	if json.Unmarshal(b, &gvks) != nil {
		return nil
	}
	return gvks
}

// fileName is kubeconform's name for a kind's schema: the kind, the first
// label of its group (none for the core group) and its version, lower case.
func fileName(gvk groupVersionKind) string {
	parts := []string{gvk.Kind}
	if gvk.Group != "" {
		parts = append(parts, strings.Split(gvk.Group, ".")[0])
	}
	parts = append(parts, gvk.Version)
	return strings.ToLower(strings.Join(parts, "-")) + ".json"
}

// writeSchema writes the schema of one kind with the definitions it reaches.
func writeSchema(outDir string, gvk groupVersionKind, name string, defs map[string]any) error {
	reached := map[string]any{}
	collectRefs(defs[name], defs, reached)
	schema := map[string]any{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"$ref":    refPrefix + name,
	}
	reached[name] = defs[name]
	schema["definitions"] = reached
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	file := fileName(gvk)
	if strings.ContainsAny(file, `/\`) || strings.HasPrefix(file, ".") {
		return fmt.Errorf("definition %s: kind %+v makes no file name", name, gvk)
	}
	return os.WriteFile(filepath.Join(outDir, file), b, 0o644)
}

// collectRefs adds to reached every definition that node refers to, directly or not.
func collectRefs(node any, defs, reached map[string]any) {
	switch v := node.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			target := strings.TrimPrefix(ref, refPrefix)
			if _, seen := reached[target]; !seen {
				if def, ok := defs[target]; ok {
					reached[target] = def
					collectRefs(def, defs, reached)
				}
			}
		}
		for _, child := range v {
			collectRefs(child, defs, reached)
		}
	case []any:
		for _, child := range v {
			collectRefs(child, defs, reached)
		}
	}
}

// strict returns a copy of an OpenAPI schema made strict for validation:
// no description, no other properties than those listed, and an
// int-or-string that is a string or an integer.
func strict(node any) any {
	switch v := node.(type) {
	case map[string]any:
		if v["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{
				map[string]any{"type": "string"}, map[string]any{"type": "integer"},
			}}
		}
		out := make(map[string]any, len(v)+1)
		for key, child := range v {
			switch key {
			case "description":
			case "properties":
				out[key] = strictEach(child)
			default:
				out[key] = strict(child)
			}
		}
		if _, ok := v["properties"]; ok {
			if _, set := v["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, child := range v {
			out[i] = strict(child)
		}
		return out
	default:
		return node
	}
}

// strictEach makes strict each schema of a properties map, whose keys are
// field names rather than keywords: a field may be called "properties".
func strictEach(node any) any {
	fields, ok := node.(map[string]any)
	if !ok {
		return node
	}
	out := make(map[string]any, len(fields))
	for name, schema := range fields {
		out[name] = strict(schema)
	}
	return out
}
