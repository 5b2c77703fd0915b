// MockIdP: Apple/Google/Facebook-shaped identity provider on loopback (issue 3).
