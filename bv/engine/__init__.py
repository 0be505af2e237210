"""The request engine: endpoints, backends, the retry policy, the reply cache, bounded ordered
streaming and progress. Imports only bv.core."""
