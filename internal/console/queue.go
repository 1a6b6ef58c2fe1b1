package console

import "net/http"

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) proposalPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) approve(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) reject(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}
