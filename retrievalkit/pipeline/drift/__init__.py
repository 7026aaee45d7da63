"""Label-free comparison of two retrievers on a query log."""
