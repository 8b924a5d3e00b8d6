// Package openapitest holds HTTP traffic and routes against the OpenAPI
// document of package httpapi (httpapi.OpenAPI), for tests.
//
// Handler wraps a test server's handler, and Check takes an exchange a
// client saw; both fail the test when:
//   - an answer to a documented operation is not documented: its status
//     (every status an operation gives must be listed), its headers, its
//     media type and its body's schema;
//   - a request the server accepted (2xx) is not valid by the document: a
//     document stricter than the server is a mistake of the document.
//     Refused requests are not checked: the tests send bad input on purpose;
//   - a path the document lacks does not answer 404, or a method it lacks
//     on a documented path does not answer 405 with Allow, as an error
//     object.
//
// Compare holds the routes a server mounts against the documented ones
// (Documented), naming each one on one side only; the tests of httpapi and
// of outboxd serve give it the patterns their muxes registered, so that a
// route added without its documentation fails them.
//
// The validator is github.com/getkin/kin-openapi (openapi3filter), which
// validates an OpenAPI 3.1 document's schemas as JSON Schema 2020-12. Only
// tests import this package, so only test binaries link the validator.
package openapitest
