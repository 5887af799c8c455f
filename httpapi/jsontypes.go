package httpapi

// The JSON types the routes answer with but the CLI does not print; the shared
// renderings of the wire replies are package jsonview's.

type createdTokenJSON struct {
	Token string `json:"token"`
}
