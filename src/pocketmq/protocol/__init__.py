"""Wire codecs: RocketMQ's remoting frames, headers and message records, and (only here) the v2 protobufs."""
