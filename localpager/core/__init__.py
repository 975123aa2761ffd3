"""The paging core: turns and pages, boundaries, eviction, keywords and bookmarks, dates, text.

What a conversation is and how it is paged, with no model, no file and no network: records, the text
toolkit, relative dates, the answer types of questions and turns, page boundaries, eviction policies,
keyword extraction, bookmarks, the pager and the token-counting protocol. Imports nothing of localpager
outside this folder.
"""
