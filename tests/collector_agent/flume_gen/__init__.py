__all__ = ['ttypes', 'constants', 'ThriftSourceProtocol']
