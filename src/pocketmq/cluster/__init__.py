"""Cluster: the name server (route table + remoting shell), broker registration, the name server client."""
