package console

import "net/http"

func (c *Console) needsReviewPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}
