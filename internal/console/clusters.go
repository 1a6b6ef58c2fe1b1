package console

import "net/http"

func (c *Console) clustersPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}

func (c *Console) correctClusters(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}
