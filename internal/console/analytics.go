package console

import "net/http"

func (c *Console) analyticsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) analyticsExport(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}
