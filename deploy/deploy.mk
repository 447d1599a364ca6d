# deploy.mk - image, install and deployment checks (included by the Makefile).
