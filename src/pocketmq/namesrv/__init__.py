"""The name server process: the route table (pure core), its remoting shell, its configuration."""
