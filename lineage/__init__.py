"""Forking: the Inherited link, pointers, ancestor reads, the run root and the lineage tree."""
