"""What several vendors share: node reads, selector annotations, request parsing, HAMi's template Fit and
the defaults of the `Vendor` protocol. Nothing here is any one vendor's; a vendor folder composes these."""
