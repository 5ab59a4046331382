"""Services of the evaluation app (writes, each in a transaction and starting with a permission check), one module per sub-domain."""
