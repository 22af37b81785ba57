FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY projections ./projections
COPY retrieval ./retrieval
COPY migration ./migration
COPY replay ./replay
COPY service ./service
COPY evaluation ./evaluation
COPY api ./api
# A home of its own: the cache of derived model data (MEMLEDGER_CACHE_DIR, ~/.cache/memledger)
# spares each restart the embedding of the hubness background.
RUN pip install . && useradd --system --create-home --home-dir /var/lib/memledger memledger

USER memledger
EXPOSE 8000
CMD ["memledger", "serve", "--host", "0.0.0.0", "--port", "8000"]
