"""One module per projection: its tables, and how ledger events change them."""
